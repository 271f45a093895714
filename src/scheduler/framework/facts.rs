//! A Run's scheduling facts: what every part of the scheduler reads of a Run, read once per
//! observed version of it.
//!
//! Owns [`RunFacts`], built from the object by the index when a version arrives and shared by
//! `Arc` from there through the queue ([`super::QueuedRun`]), the cycle
//! ([`super::RunCycleState`]), the assumption ([`super::Assumption`]), the nomination
//! ([`super::Nomination`]) and the active record ([`super::ActiveRun`]), as kube-scheduler's
//! `PodInfo` flows from `QueuedPodInfo` to the assumed Pod to `NodeInfo`. A version that
//! changes none of them (status churn, a Bind) keeps the record it had, so one record serves a
//! Run from its queueing to its end. It must not hold where the Run is or waits (the index and
//! the queue own that), nor anything a snapshot resolves (resource ids, affinity targets,
//! the workspace's binding, priority): those change without the Run changing.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;

use super::selector::Selector;
use super::types::{RunKey, ScopeRef};
use crate::api::resources::ResourceError;
use crate::api::{LABEL_RUNTIME_POD, Resources, Run};

/// See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFacts {
    /// The `metadata.generation` they were read at: a later version of the same generation,
    /// labels and submitter has the same facts (every other one is in the spec, and the API
    /// server counts a generation with every change to it).
    pub generation: Option<i64>,
    pub key: RunKey,
    pub name: String,
    /// The Runtime it names, in its namespace.
    pub scope: ScopeRef,
    /// Its request as usage counts it; the complete request when [`RunFacts::invalid`] is
    /// `None`.
    pub counted: CountedRequest,
    /// Why `spec.resources.requests` cannot be read (its own cycle fails it with that error;
    /// boxed: nearly every Run has none).
    pub invalid: Option<Box<ResourceError>>,
    pub labels: BTreeMap<String, String>,
    /// Its valid required anti-affinity selectors: a Run matching one of them must not join
    /// its Pod (anti-affinity is symmetric, as in Kubernetes).
    pub anti_affinity: Vec<Selector>,
    /// The PersistentWorkspace it names.
    pub workspace: Option<String>,
    /// Who submitted it (`kruntimes.io/submitted-by`): its fairness group by default.
    pub submitter: Option<String>,
}

impl RunFacts {
    pub fn of(run: &Run) -> Self {
        // One parse for a valid request, which nearly every Run has.
        let (counted, invalid) = match run.request() {
            Ok(amounts) => (
                CountedRequest {
                    amounts,
                    unknown: Vec::new(),
                },
                None,
            ),
            Err(e) => {
                let (amounts, unknown) = run.counted_request();
                (CountedRequest { amounts, unknown }, Some(Box::new(e)))
            }
        };
        RunFacts {
            generation: run.metadata.generation,
            key: RunKey::of(run),
            name: run.name_any(),
            scope: ScopeRef::new(&run.namespace().unwrap_or_default(), &run.spec.runtime),
            counted,
            invalid,
            labels: run.labels().clone(),
            anti_affinity: required_anti_affinity(run),
            workspace: run.workspace_name().map(str::to_string),
            submitter: super::fairness::submitter(run).map(String::from),
        }
    }

    /// The facts of `run`, as `previous` when they are the same: a version that changed none
    /// of them keeps the record every holder shares.
    ///
    /// Status churn is most of a Run's versions (a claim, a heartbeat-driven requeue, the
    /// end): for those the record is kept without reading the object again.
    pub fn renewed(run: &Run, previous: Option<&Arc<RunFacts>>) -> Arc<RunFacts> {
        if let Some(previous) = previous
            && previous.read_at(run)
        {
            return previous.clone();
        }
        let facts = RunFacts::of(run);
        match previous {
            Some(previous) if **previous == facts => previous.clone(),
            _ => Arc::new(facts),
        }
    }

    /// Whether `run` is a version these facts were read from, by its generation, labels and
    /// submitter (never without a generation: an object from elsewhere is read again).
    fn read_at(&self, run: &Run) -> bool {
        self.generation.is_some()
            && self.generation == run.metadata.generation
            && self.labels == *run.labels()
            && self.submitter.as_deref() == super::fairness::submitter(run)
    }

    /// The complete request (defaults applied, zero amounts dropped), or why it cannot be read.
    pub fn request(&self) -> Result<&Resources, &ResourceError> {
        match &self.invalid {
            None => Ok(&self.counted.amounts),
            Some(e) => Err(e),
        }
    }
}

/// A Run's request as usage counts it.
///
/// A Run that reached the active set with an unparseable request (created before
/// validation existed, or assigned by something else) is counted conservatively: every
/// resource whose quantity cannot be read is *unknown*, and a Pod hosting such a Run has none
/// of that resource left (see [`super::Load::used`]) until the Run leaves. Readable entries
/// count at their value, and `runs` still defaults to 1.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountedRequest {
    pub amounts: Resources,
    pub unknown: Vec<String>,
}

/// The valid required anti-affinity selectors of `run`; invalid terms are skipped (PreFilter
/// reports them for the Run itself; here they must not break accounting).
fn required_anti_affinity(run: &Run) -> Vec<Selector> {
    let terms = run
        .spec
        .affinity
        .as_ref()
        .and_then(|a| a.run_anti_affinity.as_ref())
        .map(|t| t.required.as_slice())
        .unwrap_or_default();
    terms
        .iter()
        .filter(|t| t.topology_key == LABEL_RUNTIME_POD)
        .filter_map(|t| Selector::compile(&t.label_selector, "").ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{RunBuilder, run};

    fn at(builder: RunBuilder, generation: i64) -> Run {
        let mut run = builder.build();
        run.metadata.generation = Some(generation);
        run
    }

    #[test]
    fn a_version_is_read_again_unless_its_generation_labels_and_submitter_are_the_ones_read() {
        let a = run("a").labels(&[("app", "x")]).submitted_by("ann");
        let first = RunFacts::renewed(&at(a.clone(), 1), None);
        let same = |version: &Run| Arc::ptr_eq(&first, &RunFacts::renewed(version, Some(&first)));

        // Status churn: the same record.
        assert!(same(&at(a.clone().on("p1"), 1)));
        // Labels and annotations are not in the generation: read again.
        let relabelled = at(a.clone().labels(&[("app", "y")]), 1);
        assert!(!same(&relabelled));
        assert_eq!(
            RunFacts::renewed(&relabelled, Some(&first)).labels["app"],
            "y"
        );
        let resubmitted = at(a.clone().submitted_by("bob"), 1);
        let resubmitted = RunFacts::renewed(&resubmitted, Some(&first));
        assert_eq!(resubmitted.submitter.as_deref(), Some("bob"));
        // A spec change is a new generation: read again.
        let more = RunFacts::renewed(&at(a.clone().requests(&[("runs", 2)]), 2), Some(&first));
        assert_eq!(more.request().unwrap().get("runs"), 2);
        // Without a generation (an object from elsewhere) it is always read.
        let before = RunFacts::renewed(&a.build(), None);
        let after = RunFacts::renewed(&a.clone().requests(&[("runs", 3)]).build(), Some(&before));
        assert_eq!(after.request().unwrap().get("runs"), 3);
    }
}
