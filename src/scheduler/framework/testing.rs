//! Test builders that read like the domain: `run("a").requests(&[("example.com/gpu", 1)])`,
//! `pod("p1").capacity(&[("runs", 4)]).ready()`, and a [`World`] that turns them into a
//! [`SchedulerCache`]. Test-only; it must not be used by production code.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, MicroTime, ObjectMeta, Time,
};

use super::assumed::Assumption;
use super::cache::SchedulerCache;
use super::cycle::pre_filter;
use super::index::required_anti_affinity;
use super::plugin::{FilterPlugin, ScorePlugin};
use super::selector::Selector;
use super::types::RunKey;
use crate::api::resources::parse_requests;
use crate::api::{
    AffinityTerms, LABEL_RUNTIME, LABEL_RUNTIME_POD, Run, RunAffinity, RunAffinityTerm, RunPhase,
    RunResources, RunSpec, RunStatus, WeightedRunAffinityTerm,
};

pub const NS: &str = "default";
pub const RUNTIME: &str = "python";
/// The fixed "now" of every test.
pub const NOW: Timestamp = Timestamp::constant(1_700_000_000, 0);
/// How long ago a fresh heartbeat was renewed, and the Lease duration.
const FRESH_AGO: i64 = 5;
const LEASE_SECONDS: i32 = 40;

fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A `LabelSelector` of `(key, operator, values)` expressions.
pub fn label_selector(exprs: &[(&str, &str, &[&str])]) -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(
            exprs
                .iter()
                .map(|(key, op, values)| LabelSelectorRequirement {
                    key: key.to_string(),
                    operator: op.to_string(),
                    values: (!values.is_empty())
                        .then(|| values.iter().map(|v| v.to_string()).collect()),
                })
                .collect(),
        ),
    }
}

/// A one-expression `LabelSelector`.
pub fn expr_selector(key: &str, op: &str, values: &[&str]) -> LabelSelector {
    label_selector(&[(key, op, values)])
}

/// A compiled selector of `(key, operator, values)` expressions.
pub fn selector_expr(exprs: &[(&str, &str, &[&str])]) -> Selector {
    Selector::compile(&label_selector(exprs), "test").expect("valid test selector")
}

fn match_labels(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(string_map(pairs)),
        match_expressions: None,
    }
}

// ----- Runs ---------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct RunBuilder {
    name: String,
    namespace: String,
    runtime: String,
    uid: Option<String>,
    requests: Option<BTreeMap<String, Quantity>>,
    labels: BTreeMap<String, String>,
    affinity: RunAffinity,
    phase: RunPhase,
    pod: Option<String>,
}

/// A Pending Run in [`NS`] for [`RUNTIME`] with UID `uid-<name>`.
pub fn run(name: &str) -> RunBuilder {
    RunBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        runtime: RUNTIME.to_string(),
        uid: None,
        requests: None,
        labels: BTreeMap::new(),
        affinity: RunAffinity::default(),
        phase: RunPhase::Pending,
        pod: None,
    }
}

impl RunBuilder {
    pub fn ns(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_string();
        self
    }

    pub fn runtime(mut self, runtime: &str) -> Self {
        self.runtime = runtime.to_string();
        self
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.uid = Some(uid.to_string());
        self
    }

    /// Adds whole-number requests.
    pub fn requests(self, requests: &[(&str, u64)]) -> Self {
        let strs: Vec<(String, String)> = requests
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let refs: Vec<(&str, &str)> = strs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.request_strs(&refs)
    }

    /// Adds requests as raw quantity strings (possibly invalid).
    pub fn request_strs(mut self, requests: &[(&str, &str)]) -> Self {
        let map = self.requests.get_or_insert_with(BTreeMap::new);
        for (k, v) in requests {
            map.insert(k.to_string(), Quantity(v.to_string()));
        }
        self
    }

    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        self.labels.extend(string_map(labels));
        self
    }

    fn terms(&mut self, anti: bool) -> &mut AffinityTerms {
        let slot = if anti {
            &mut self.affinity.run_anti_affinity
        } else {
            &mut self.affinity.run_affinity
        };
        slot.get_or_insert_with(AffinityTerms::default)
    }

    /// A required affinity term with an arbitrary topology key and selector.
    pub fn affinity_term(
        mut self,
        anti: bool,
        topology_key: &str,
        selector: LabelSelector,
    ) -> Self {
        self.terms(anti).required.push(RunAffinityTerm {
            label_selector: selector,
            topology_key: topology_key.to_string(),
        });
        self
    }

    /// Required affinity to Runs with these labels.
    pub fn requires(self, labels: &[(&str, &str)]) -> Self {
        self.affinity_term(false, LABEL_RUNTIME_POD, match_labels(labels))
    }

    /// Required anti-affinity to Runs with these labels.
    pub fn anti(self, labels: &[(&str, &str)]) -> Self {
        self.affinity_term(true, LABEL_RUNTIME_POD, match_labels(labels))
    }

    fn preferred(mut self, anti: bool, weight: i32, labels: &[(&str, &str)]) -> Self {
        self.terms(anti).preferred.push(WeightedRunAffinityTerm {
            weight,
            term: RunAffinityTerm {
                label_selector: match_labels(labels),
                topology_key: LABEL_RUNTIME_POD.to_string(),
            },
        });
        self
    }

    /// Preferred affinity to Runs with these labels.
    pub fn prefers(self, weight: i32, labels: &[(&str, &str)]) -> Self {
        self.preferred(false, weight, labels)
    }

    /// Preferred anti-affinity to Runs with these labels.
    pub fn avoids(self, weight: i32, labels: &[(&str, &str)]) -> Self {
        self.preferred(true, weight, labels)
    }

    /// Scheduled on `pod` (active).
    pub fn on(mut self, pod: &str) -> Self {
        self.phase = RunPhase::Scheduled;
        self.pod = Some(pod.to_string());
        self
    }

    pub fn running(mut self) -> Self {
        self.phase = RunPhase::Running;
        self
    }

    pub fn succeeded(mut self) -> Self {
        self.phase = RunPhase::Succeeded;
        self
    }

    pub fn failed(mut self) -> Self {
        self.phase = RunPhase::Failed;
        self
    }

    pub fn pending(mut self) -> Self {
        self.phase = RunPhase::Pending;
        self
    }

    pub fn key(&self) -> RunKey {
        RunKey::of(&self.build())
    }

    pub fn build(&self) -> Run {
        let mut run = Run::new(
            &self.name,
            RunSpec {
                runtime: self.runtime.clone(),
                resources: self
                    .requests
                    .clone()
                    .map(|requests| RunResources { requests }),
                affinity: (self.affinity != RunAffinity::default()).then(|| self.affinity.clone()),
                mode: None,
            },
        );
        run.metadata.namespace = Some(self.namespace.clone());
        run.metadata.uid = Some(
            self.uid
                .clone()
                .unwrap_or_else(|| format!("uid-{}", self.name)),
        );
        run.metadata.labels = (!self.labels.is_empty()).then(|| self.labels.clone());
        run.status = Some(RunStatus {
            phase: Some(self.phase),
            pod_name: self.pod.clone(),
            // Bound to the Pod's default UID, as the scheduler's Bind writes it.
            pod_uid: self.pod.as_ref().map(|p| format!("pod-uid-{p}")),
            ..Default::default()
        });
        run
    }

    /// The assumption Reserve would record for this Run on `pod`.
    pub fn assumption(&self, pod: &str) -> Assumption {
        let run = self.build();
        Assumption {
            run_name: self.name.clone(),
            runtime: self.runtime.clone(),
            pod: pod.to_string(),
            request: parse_requests(self.requests.as_ref()).expect("valid test request"),
            labels: self.labels.clone(),
            anti_affinity: required_anti_affinity(&run),
        }
    }
}

// ----- Pods and Leases ----------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Heartbeat {
    RenewedAgo(i64),
    Missing,
    Foreign,
}

#[derive(Debug, Clone)]
pub struct PodBuilder {
    name: String,
    namespace: String,
    runtime: String,
    uid: Option<String>,
    ready: bool,
    deleting: bool,
    annotations: BTreeMap<String, String>,
    heartbeat: Heartbeat,
}

/// A Ready Runtime Pod of [`RUNTIME`] in [`NS`] with a fresh heartbeat and no capacity
/// annotations (so the default runs capacity of 1).
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        runtime: RUNTIME.to_string(),
        uid: None,
        ready: true,
        deleting: false,
        annotations: BTreeMap::new(),
        heartbeat: Heartbeat::RenewedAgo(FRESH_AGO),
    }
}

impl PodBuilder {
    /// Replaces the capacity annotations.
    pub fn capacity(mut self, capacity: &[(&str, u64)]) -> Self {
        self.annotations
            .retain(|k, _| !k.starts_with("kruntimes.io/capacity."));
        for (resource, amount) in capacity {
            self.annotations.insert(
                format!("kruntimes.io/capacity.{resource}"),
                amount.to_string(),
            );
        }
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    pub fn ns(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_string();
        self
    }

    pub fn runtime(mut self, runtime: &str) -> Self {
        self.runtime = runtime.to_string();
        self
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.uid = Some(uid.to_string());
        self
    }

    pub fn ready(mut self) -> Self {
        self.ready = true;
        self
    }

    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }

    pub fn deleting(mut self) -> Self {
        self.deleting = true;
        self
    }

    /// Heartbeat renewed 60 s ago with a 40 s duration.
    pub fn stale(self) -> Self {
        self.lease_renewed_ago(60)
    }

    pub fn lease_renewed_ago(mut self, seconds: i64) -> Self {
        self.heartbeat = Heartbeat::RenewedAgo(seconds);
        self
    }

    pub fn no_lease(mut self) -> Self {
        self.heartbeat = Heartbeat::Missing;
        self
    }

    /// A fresh Lease held by some other identity.
    pub fn foreign_lease(mut self) -> Self {
        self.heartbeat = Heartbeat::Foreign;
        self
    }

    fn uid_value(&self) -> String {
        self.uid
            .clone()
            .unwrap_or_else(|| format!("pod-uid-{}", self.name))
    }

    pub fn build(&self) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                uid: Some(self.uid_value()),
                labels: Some(string_map(&[
                    (LABEL_RUNTIME, &self.runtime),
                    (LABEL_RUNTIME_POD, &self.name),
                ])),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                deletion_timestamp: self.deleting.then_some(Time(NOW)),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".to_string(),
                    status: if self.ready { "True" } else { "False" }.to_string(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    pub fn build_lease(&self) -> Option<Lease> {
        let (holder, ago) = match self.heartbeat {
            Heartbeat::RenewedAgo(ago) => (self.uid_value(), ago),
            Heartbeat::Missing => return None,
            Heartbeat::Foreign => ("someone-else".to_string(), FRESH_AGO),
        };
        let mut l = lease(&self.name, &holder, -ago, LEASE_SECONDS);
        l.metadata.namespace = Some(self.namespace.clone());
        Some(l)
    }
}

/// A heartbeat Lease for `pod` in [`NS`], renewed `renewed_at` seconds after [`NOW`].
/// `NOW + seconds`.
pub fn at(seconds: i64) -> Timestamp {
    NOW.checked_add(SignedDuration::from_secs(seconds))
        .expect("test time in range")
}

pub fn lease(pod: &str, holder: &str, renewed_at: i64, duration: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(pod.to_string()),
            namespace: Some(NS.to_string()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_string()),
            renew_time: Some(MicroTime(
                NOW.checked_add(SignedDuration::from_secs(renewed_at))
                    .expect("test time in range"),
            )),
            lease_duration_seconds: Some(duration),
            ..Default::default()
        }),
    }
}

// ----- World --------------------------------------------------------------------------------

/// Pods (with their Leases), Runs and assumptions, turned into a [`SchedulerCache`] on demand.
#[derive(Debug, Clone, Default)]
pub struct World {
    pods: Vec<PodBuilder>,
    runs: Vec<RunBuilder>,
    assumptions: Vec<(RunBuilder, String)>,
}

impl World {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn pods(mut self, pods: impl IntoIterator<Item = PodBuilder>) -> Self {
        self.pods.extend(pods);
        self
    }

    pub fn runs(mut self, runs: impl IntoIterator<Item = RunBuilder>) -> Self {
        self.runs.extend(runs);
        self
    }

    /// A Pending Run with a scheduler-local assumption on `pod`.
    pub fn assume(mut self, run: RunBuilder, pod: &str) -> Self {
        self.assumptions.push((run, pod.to_string()));
        self
    }

    pub fn state(&self) -> SchedulerCache {
        let pods: Vec<Pod> = self.pods.iter().map(PodBuilder::build).collect();
        let leases: Vec<Lease> = self
            .pods
            .iter()
            .filter_map(PodBuilder::build_lease)
            .collect();
        let runs: Vec<Run> = self.runs.iter().map(RunBuilder::build).collect();
        // The world's Runtime exists; its Pods are the world's Pods.
        let mut runtime = crate::api::Runtime::new(RUNTIME, Default::default());
        runtime.metadata.namespace = Some(NS.to_string());
        let mut state = SchedulerCache::from_objects([&runtime], &pods, &leases, &runs, NOW);
        for (r, pod) in &self.assumptions {
            state.apply_run(&r.clone().pending().build());
            state
                .reserve(&r.key(), r.assumption(pod))
                .expect("test assumptions fit");
        }
        state
    }
}

/// Each Pod of the Run's scope with the plugin's verdict (the rejection's message).
pub fn filter_verdicts(
    plugin: &dyn FilterPlugin,
    world: &World,
    r: &RunBuilder,
) -> Vec<(String, Result<(), String>)> {
    let state = world.state();
    let run = r.build();
    let snap = state.snapshot(&r.namespace, &r.runtime, NOW);
    let cycle = pre_filter(&snap, &run).expect("valid test run");
    let own = snap.own(&cycle.key);
    snap.pods_for(own)
        .map(|p| {
            let verdict = plugin
                .filter(&snap, &cycle, &p)
                .map_err(|rej| rej.message().into_owned());
            (p.name().to_string(), verdict)
        })
        .collect()
}

/// Each Pod of the Run's scope (all treated as feasible) with (raw, normalized) scores.
pub fn score_table(
    plugin: &dyn ScorePlugin,
    world: &World,
    r: &RunBuilder,
) -> Vec<(String, i64, i64)> {
    let state = world.state();
    let run = r.build();
    let snap = state.snapshot(&r.namespace, &r.runtime, NOW);
    let cycle = pre_filter(&snap, &run).expect("valid test run");
    let own = snap.own(&cycle.key);
    let pods: Vec<_> = snap.pods_for(own).collect();
    let raw: Vec<i64> = pods
        .iter()
        .map(|p| plugin.score(&snap, &cycle, p).expect("score"))
        .collect();
    let mut normalized = raw.clone();
    plugin.normalize(&mut normalized);
    pods.iter()
        .zip(raw.into_iter().zip(normalized))
        .map(|(p, (raw, norm))| (p.name().to_string(), raw, norm))
        .collect()
}
