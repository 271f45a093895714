//! The scheduling cycle for one Run: PreFilter → Filter → Score → pick.
//!
//! Owns the one function, [`evaluate`], that both the scheduler and `explain` call; the
//! [`Evaluation`] it returns carries per-Pod detail for `explain` and
//! [`Evaluation::decision`] for the scheduler, so no rule is ever implemented twice. It must
//! not reserve, bind or mutate anything (the [`super::cache`] does).
//!
//! Rules:
//! - PreFilter validates the Run's requests and affinity terms once; invalid input is a
//!   permanent [`Decision::Invalid`] whose message names the field and the value. It also
//!   resolves the Run's PersistentWorkspace binding once: a workspace of another Runtime, a
//!   Lost or a Released one is refused the same way (`spec.workspace.name`).
//! - Filter runs every registered filter on every Runtime Pod in Pod-name order and stops at a
//!   Pod's first rejection.
//! - Score runs every Score plugin on the feasible Pods, normalizes to 0..=100, multiplies by
//!   the weight and sums. The highest total wins; on equal totals the lexicographically
//!   smallest Pod name wins (deterministic, unlike kube-scheduler's random pick).
//! - When no Pod is feasible the Pending message is `0/N Runtime Pods are available: <count>
//!   <reason>, ….` with entries ordered by count (descending) then text, and with no Runtime
//!   Pods at all it is exactly `0/0 Runtime Pods are available; waiting for available runtime
//!   pods.` (there is nothing to count, and the message stays free of names; the second half
//!   is the Go project's words for the wait, which its users and tests look for).

use super::plugin::{PreferredTerm, RequiredTerm, RunCycleState, RunWorkspace, WorkspaceBinding};
use super::priority::MissingClass;
use super::queue::QueuedRun;
use super::registry::Registry;
use super::selector::Selector;
use super::snapshot::{PodView, Snapshot};
use super::types::{MAX_SCORE, MIN_SCORE, Rejection};
use crate::api::status::reasons::{INVALID_WORKSPACE, WORKSPACE_LOST};
use crate::api::{AffinityTerms, LABEL_RUNTIME_POD, Run, WorkspacePhase};

mod outcome;
pub use outcome::{
    CycleError, Decision, PluginScore, PreFilterError, RejectionCount, Unschedulable,
};

/// The verdict on one Pod.
#[derive(Debug, Clone)]
pub struct PodEvaluation<'s> {
    pub pod: PodView<'s>,
    /// The first rejecting filter, `None` when the Pod is feasible.
    pub rejection: Option<Rejection>,
    /// Column of this Pod in the score table, when feasible.
    feasible: Option<usize>,
}

/// The full result of a cycle: per-Pod verdicts and scores, and the chosen Pod.
#[derive(Debug)]
pub struct Evaluation<'s> {
    state: Result<RunCycleState, PreFilterError>,
    pods: Vec<PodEvaluation<'s>>,
    /// (plugin, weight, raw scores, normalized scores), one column per feasible Pod.
    scores: Vec<(&'static str, i64, Vec<i64>, Vec<i64>)>,
    totals: Vec<i64>,
    chosen: Option<usize>,
    /// The Runtime's name when it does not exist and has no Runtime Pods.
    missing_runtime: Option<&'s str>,
    /// The Run's PriorityClass, when it does not exist (no Pod was evaluated).
    missing_class: Option<MissingClass>,
}

impl<'s> Evaluation<'s> {
    /// The prepared Run state, or why PreFilter refused the Run.
    pub fn state(&self) -> Result<&RunCycleState, &PreFilterError> {
        self.state.as_ref()
    }

    /// Every Runtime Pod of the scope in name order (empty when PreFilter refused the Run).
    pub fn pods(&self) -> &[PodEvaluation<'s>] {
        &self.pods
    }

    /// Index into [`Evaluation::pods`] of the Pod the scheduler picks.
    pub fn chosen_index(&self) -> Option<usize> {
        self.chosen
    }

    pub fn chosen(&self) -> Option<&PodEvaluation<'s>> {
        self.chosen.map(|i| &self.pods[i])
    }

    /// Per-plugin scores of `pods()[index]`; empty when it was rejected.
    pub fn scores(&self, index: usize) -> Vec<PluginScore> {
        let Some(col) = self.pods[index].feasible else {
            return Vec::new();
        };
        self.scores
            .iter()
            .map(|(plugin, weight, raw, norm)| PluginScore {
                plugin,
                weight: *weight,
                raw: raw[col],
                normalized: norm[col],
            })
            .collect()
    }

    /// Weighted total of `pods()[index]`; `None` when it was rejected.
    pub fn total(&self, index: usize) -> Option<i64> {
        self.pods[index].feasible.map(|col| self.totals[col])
    }

    /// Rejections per (plugin, reason, resource), ordered by count (descending) then text.
    /// Feed `kruntimes_scheduler_filter_rejections_total{plugin, reason}` from this whatever
    /// the decision: every rejected Pod evaluation counts.
    pub fn rejections(&self) -> Vec<RejectionCount> {
        let mut counts: Vec<RejectionCount> = Vec::new();
        for r in self.pods.iter().filter_map(|p| p.rejection.as_ref()) {
            match counts.iter_mut().find(|c| {
                c.plugin == r.plugin && c.reason == r.reason && c.resource.as_ref() == r.resource()
            }) {
                Some(c) => c.count += 1,
                None => counts.push(RejectionCount {
                    plugin: r.plugin,
                    reason: r.reason,
                    resource: r.resource().cloned(),
                    count: 1,
                }),
            }
        }
        let mut keyed: Vec<(String, RejectionCount)> =
            counts.into_iter().map(|c| (c.text(), c)).collect();
        keyed.sort_by(|(ta, a), (tb, b)| b.count.cmp(&a.count).then_with(|| ta.cmp(tb)));
        keyed.into_iter().map(|(_, c)| c).collect()
    }

    pub fn decision(&self) -> Decision {
        if let Err(e) = &self.state {
            return Decision::Invalid {
                reason: e.reason(),
                message: e.to_string(),
            };
        }
        match self.chosen {
            Some(i) => {
                let pod = &self.pods[i].pod;
                Decision::Schedule {
                    pod: pod.name().to_string(),
                    pod_uid: pod.uid().to_string(),
                    total: self.total(i).expect("the chosen Pod is feasible"),
                    scores: self.scores(i),
                }
            }
            None => Decision::Unschedulable(Unschedulable {
                total_pods: self.pods.len(),
                histogram: self.rejections(),
                missing_runtime: self.missing_runtime.map(str::to_string),
                missing_class: self.missing_class.clone(),
            }),
        }
    }
}

/// PreFilter: validates the Run's inputs and computes what the plugins need, once. The
/// request was parsed when the Run was queued.
pub fn pre_filter(
    snapshot: &Snapshot<'_>,
    queued: &QueuedRun,
) -> Result<RunCycleState, PreFilterError> {
    let run = &*queued.run;
    // A cancelled Run is never placed, whatever else it asks for.
    if run.spec.cancel_requested {
        return Err(PreFilterError::Cancelled);
    }
    let facts = &queued.facts;
    let request = facts.request().map_err(|e| e.clone())?;
    let affinity = run.spec.affinity.as_ref();
    let (required, preferred) = compile_terms(
        affinity.and_then(|a| a.run_affinity.as_ref()),
        "spec.affinity.runAffinity",
    )?;
    let (anti_required, anti_preferred) = compile_terms(
        affinity.and_then(|a| a.run_anti_affinity.as_ref()),
        "spec.affinity.runAntiAffinity",
    )?;

    let (key, labels) = (&facts.key, &facts.labels);
    let required_term = |selector: Selector| RequiredTerm {
        targets: snapshot.targets(&selector, &key.uid),
        matches_self: selector.matches(labels),
        selector,
    };
    let required_affinity = required.into_iter().map(required_term).collect();
    let required_anti_affinity = anti_required.into_iter().map(required_term).collect();
    let preferred = preferred
        .into_iter()
        .chain(anti_preferred.into_iter().map(|(w, s)| (-w, s)))
        .map(|(weight, selector)| PreferredTerm {
            weight,
            targets: snapshot.targets(&selector, &key.uid),
            selector,
        })
        .collect();
    let workspace = facts
        .workspace
        .as_deref()
        .map(|name| run_workspace(snapshot, run, name))
        .transpose()?;
    let repelled_by = snapshot.anti_affinity_against(labels, &key.uid);
    let request_list = snapshot.requested(request);
    Ok(RunCycleState {
        facts: facts.clone(),
        request_list,
        required_affinity,
        required_anti_affinity,
        preferred,
        repelled_by,
        workspace,
        priority: snapshot.priority_of(run).unwrap_or(0),
        preempts: snapshot.priority_classes().preempts(run),
    })
}

/// The Run's workspace as the snapshot binds it; an error when the Run cannot use it.
fn run_workspace(
    snapshot: &Snapshot<'_>,
    run: &Run,
    name: &str,
) -> Result<RunWorkspace, PreFilterError> {
    let view = snapshot.workspace(name);
    let refuse = |reason, message: String| PreFilterError::Workspace {
        field: "spec.workspace.name".into(),
        reason,
        message,
    };
    let binding = match view.record {
        None => WorkspaceBinding::Missing,
        Some(r) if r.runtime != run.spec.runtime => {
            return Err(refuse(
                INVALID_WORKSPACE,
                format!(
                    "PersistentWorkspace {name:?} belongs to Runtime {:?}, not {:?}: name a workspace of Runtime {:?}, or create one",
                    r.runtime, run.spec.runtime, run.spec.runtime
                ),
            ));
        }
        Some(r) if r.phase == WorkspacePhase::Lost => {
            return Err(refuse(
                WORKSPACE_LOST,
                format!(
                    "PersistentWorkspace {name:?} is Lost: its Runtime Pod {} is gone, and its data with it; create a new workspace and run again",
                    r.bound_pod.as_deref().unwrap_or("(unknown)")
                ),
            ));
        }
        Some(r) if r.phase == WorkspacePhase::Released => {
            return Err(refuse(
                INVALID_WORKSPACE,
                format!(
                    "PersistentWorkspace {name:?} was Released after ttlSecondsAfterUnused without use: create a new workspace"
                ),
            ));
        }
        Some(_) => match view.bound_pod {
            Some(pod) => WorkspaceBinding::Bound {
                pod: pod.to_string(),
            },
            None => WorkspaceBinding::Unbound,
        },
    };
    Ok(RunWorkspace {
        name: name.to_string(),
        binding,
    })
}

type Compiled = (Vec<Selector>, Vec<(i64, Selector)>);

/// Validates one kind's required and preferred terms.
fn compile_terms(terms: Option<&AffinityTerms>, base: &str) -> Result<Compiled, PreFilterError> {
    let Some(terms) = terms else {
        return Ok((Vec::new(), Vec::new()));
    };
    let term = |t: &crate::api::RunAffinityTerm, field: String| {
        if t.topology_key != LABEL_RUNTIME_POD {
            return Err(PreFilterError::TopologyKey {
                field: format!("{field}.topologyKey"),
                value: t.topology_key.clone(),
            });
        }
        Ok(Selector::compile(
            &t.label_selector,
            &format!("{field}.labelSelector"),
        )?)
    };
    let required = terms
        .required
        .iter()
        .enumerate()
        .map(|(i, t)| {
            term(
                t,
                format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
            )
        })
        .collect::<Result<_, _>>()?;
    let preferred = terms
        .preferred
        .iter()
        .enumerate()
        .map(|(i, w)| {
            if !(1..=100).contains(&w.weight) {
                return Err(PreFilterError::Weight {
                    field: format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}].weight"),
                    value: w.weight,
                });
            }
            Ok((
                i64::from(w.weight),
                term(&w.term, format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}].runAffinityTerm"))?,
            ))
        })
        .collect::<Result<_, _>>()?;
    Ok((required, preferred))
}

/// Filter only, on one Pod: what [`evaluate`] would say of `pod` for `run` (its first
/// rejection, `None` when feasible), without scoring or looking at any other Pod. `None` when
/// PreFilter refuses the Run or the Runtime has no such Pod.
pub fn evaluate_pod<'s>(
    snapshot: &'s Snapshot<'_>,
    registry: &Registry,
    run: &QueuedRun,
    pod: &str,
) -> Option<PodEvaluation<'s>> {
    let state = pre_filter(snapshot, run).ok()?;
    let pod = snapshot.pod_seen_by(pod, state.key())?;
    let rejection = registry
        .filters()
        .iter()
        .find_map(|f| f.filter(snapshot, &state, &pod).err());
    Some(PodEvaluation {
        pod,
        rejection,
        feasible: None,
    })
}

/// Runs one full cycle for `run` against `snapshot`. The only error is a Score plugin
/// failure; an invalid Run is an `Ok` evaluation whose decision is [`Decision::Invalid`].
pub fn evaluate<'s>(
    snapshot: &'s Snapshot<'_>,
    registry: &Registry,
    run: &QueuedRun,
) -> Result<Evaluation<'s>, CycleError> {
    let state = pre_filter(snapshot, run);
    let missing_class = snapshot.priority_of(&run.run).err();
    if state.is_err() || missing_class.is_some() {
        // Nothing to evaluate: the Run is invalid, or waits for its PriorityClass.
        return Ok(Evaluation {
            state,
            pods: Vec::new(),
            scores: Vec::new(),
            totals: Vec::new(),
            chosen: None,
            missing_runtime: None,
            missing_class,
        });
    }
    let state = state.expect("checked above");

    // Filter every Pod in name order; a Pod's first rejection ends its evaluation. A Pod
    // that passes every filter gets its raw scores right away, while its data is still in
    // cache: Score plugins are pure and per-Pod, so this is the same as a second pass over
    // the feasible Pods, only cheaper.
    let own = snapshot.own(state.key());
    let plugins = registry.scores();
    let mut pods = Vec::with_capacity(snapshot.len());
    let mut raw: Vec<Vec<i64>> = plugins
        .iter()
        .map(|_| Vec::with_capacity(snapshot.len()))
        .collect();
    let mut feasible = 0usize;
    for pod in snapshot.pods_for(own) {
        let rejection = registry
            .filters()
            .iter()
            .find_map(|f| f.filter(snapshot, &state, &pod).err());
        let column = if rejection.is_none() {
            for (ws, column) in plugins.iter().zip(raw.iter_mut()) {
                column.push(ws.plugin.score(snapshot, &state, &pod)?);
            }
            feasible += 1;
            Some(feasible - 1)
        } else {
            None
        };
        pods.push(PodEvaluation {
            pod,
            rejection,
            feasible: column,
        });
    }

    // Normalize per plugin over the feasible Pods, weight and sum.
    let mut scores = Vec::with_capacity(plugins.len());
    let mut totals = vec![0i64; feasible];
    for (ws, raw) in plugins.iter().zip(raw) {
        let plugin = ws.plugin.as_ref();
        let mut normalized = raw.clone();
        plugin.normalize(&mut normalized);
        if let Some(&score) = normalized
            .iter()
            .find(|s| !(MIN_SCORE..=MAX_SCORE).contains(*s))
        {
            return Err(CycleError::ScoreOutOfRange {
                plugin: plugin.name(),
                score,
            });
        }
        for (total, s) in totals.iter_mut().zip(&normalized) {
            *total += s * ws.weight;
        }
        scores.push((plugin.name(), ws.weight, raw, normalized));
    }

    // Highest total wins; Pods are in name order, so keeping the first maximum picks the
    // smallest name among equal totals.
    let mut chosen: Option<(usize, i64)> = None;
    for (i, pod) in pods.iter().enumerate() {
        if let Some(col) = pod.feasible
            && chosen.is_none_or(|(_, best)| totals[col] > best)
        {
            chosen = Some((i, totals[col]));
        }
    }

    // Runtime Pods without a Runtime object are used as they are; only a Runtime with
    // neither says "not found".
    let missing_runtime =
        (pods.is_empty() && !snapshot.runtime_exists()).then(|| snapshot.runtime());
    Ok(Evaluation {
        state: Ok(state),
        pods,
        scores,
        totals,
        chosen: chosen.map(|(i, _)| i),
        missing_runtime,
        missing_class: None,
    })
}

#[cfg(test)]
mod tests;
