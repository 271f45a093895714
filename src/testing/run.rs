//! The Run builder: [`run`] and [`RunBuilder`], a Run in any phase as the scheduler and
//! runtimed observe it, and the assumption Reserve would record for it.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};

use super::objects::{
    NOW, NS, RUNTIME, match_labels, quantities, setters, string_map, uid_or_default,
};
use crate::api::{
    AffinityTerms, CodeSource, FunctionMode, LABEL_RUNTIME_POD, RetryPolicy, Run, RunAffinity,
    RunAffinityTerm, RunMode, RunPhase, RunResources, RunSpec, RunStatus, RunWorkspaceReference,
    TaskMode, WeightedRunAffinityTerm,
};

use crate::scheduler::framework::{Assumption, RunFacts, RunKey};

#[derive(Debug, Clone)]
pub struct RunBuilder {
    name: String,
    namespace: String,
    runtime: String,
    uid: Option<String>,
    resource_version: Option<String>,
    created: Option<Timestamp>,
    deleting: bool,
    requests: Option<BTreeMap<String, Quantity>>,
    labels: BTreeMap<String, String>,
    submitter: Option<String>,
    affinity: RunAffinity,
    mode: RunMode,
    source: Option<CodeSource>,
    env: Vec<EnvVar>,
    phase: RunPhase,
    pod: Option<String>,
    pod_uid: Option<String>,
    nominated: Option<String>,
    workspace: Option<String>,
    priority_class: Option<String>,
    timeout: Option<String>,
    cancel_requested: bool,
    ttl: Option<i32>,
    priority: Option<i32>,
    started: Option<Timestamp>,
    disruption: bool,
    retry_policy: Option<RetryPolicy>,
    attempt: Option<i32>,
    backoff_since: Option<Timestamp>,
    bound_at: Option<Timestamp>,
}

/// A `mode.task` of `args` (no entrypoint, no working directory).
pub fn task_mode(args: &[&str]) -> TaskMode {
    TaskMode {
        args: args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A plain `name=value` environment variable (`value` `None`: set, empty).
pub fn env_var(name: &str, value: Option<&str>) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: value.map(str::to_string),
        value_from: None,
    }
}

/// A Pending Run in [`NS`] for [`RUNTIME`] with UID `uid-<name>`, no requests (so `runs: 1`)
/// and the Task `true`.
pub fn run(name: &str) -> RunBuilder {
    RunBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        runtime: RUNTIME.to_string(),
        uid: None,
        resource_version: None,
        created: None,
        deleting: false,
        requests: None,
        labels: BTreeMap::new(),
        submitter: None,
        affinity: RunAffinity::default(),
        mode: RunMode::default(),
        source: None,
        env: Vec::new(),
        phase: RunPhase::Pending,
        pod: None,
        pod_uid: None,
        nominated: None,
        workspace: None,
        priority_class: None,
        timeout: None,
        cancel_requested: false,
        ttl: None,
        priority: None,
        started: None,
        disruption: false,
        retry_policy: None,
        attempt: None,
        backoff_since: None,
        bound_at: None,
    }
    .task(&["true"])
}

impl RunBuilder {
    setters! {
        ns(namespace: &str) => namespace = namespace.to_string();
        runtime(runtime: &str) => runtime = runtime.to_string();
        uid(uid: &str) => uid = Some(uid.to_string());
        resource_version(rv: &str) => resource_version = Some(rv.to_string());
        /// Deleted, with its finalizers still holding it.
        deleting() => deleting = true;
        /// The UID of the Pod it is bound to (`status.assignedPodUID`).
        pod_uid(uid: &str) => pod_uid = Some(uid.to_string());
        /// Pending with the scheduler's nomination recorded (`status.nominatedPodName`).
        nominated(pod: &str) => nominated = Some(pod.to_string());
        /// Uses the PersistentWorkspace `name` (`spec.workspace.name`).
        workspace(name: &str) => workspace = Some(name.to_string());
        /// `spec.priorityClassName`.
        priority_class(name: &str) => priority_class = Some(name.to_string());
        /// `spec.timeout`, a Go duration such as `3s`.
        timeout(duration: &str) => timeout = Some(duration.to_string());
        /// `spec.cancelRequested: true`.
        cancel_requested() => cancel_requested = true;
        /// `spec.ttlSecondsAfterFinished`.
        ttl_after_finished(seconds: i32) => ttl = Some(seconds);
        /// `status.priority`, as the scheduler records it.
        priority(value: i32) => priority = Some(value);
        /// `status.startTime`.
        started_at(at: Timestamp) => started = Some(at);
        /// `DisruptionTarget=True/PreemptionByScheduler`: the scheduler asked runtimed to stop it.
        disruption_requested() => disruption = true;
        /// `Scheduled=True` since `at`: when its Bind was written.
        bound_at(at: Timestamp) => bound_at = Some(at);
        running() => phase = RunPhase::Running;
        /// `status.attempt`.
        attempt(attempt: i32) => attempt = Some(attempt);
        succeeded() => phase = RunPhase::Succeeded;
        failed() => phase = RunPhase::Failed;
        pending() => phase = RunPhase::Pending;
    }

    /// Created `seconds` after the Unix epoch.
    pub fn created(mut self, seconds: i64) -> Self {
        self.created = Some(Timestamp::from_second(seconds).expect("test time in range"));
        self
    }

    /// Adds whole-number requests.
    pub fn requests(mut self, requests: &[(&str, u64)]) -> Self {
        self.requests
            .get_or_insert_with(BTreeMap::new)
            .extend(quantities(requests));
        self
    }

    /// Adds requests as raw quantity strings (possibly invalid, which only the scheduler
    /// refuses).
    pub fn request_strs(mut self, requests: &[(&str, &str)]) -> Self {
        self.requests
            .get_or_insert_with(BTreeMap::new)
            .extend(quantities(requests));
        self
    }

    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        self.labels.extend(string_map(labels));
        self
    }

    /// Submitted by `user`, as the submitter admission policy records it.
    pub fn submitted_by(mut self, user: &str) -> Self {
        self.submitter = Some(user.to_string());
        self
    }

    /// A Task running `args` (replacing the default `true`; keeps the environment).
    pub fn task(mut self, args: &[&str]) -> Self {
        self.task_mut().args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// A Task whose code is `script` (`spec.source.inline`, the Go project's style: an empty
    /// `mode.task`).
    pub fn inline(mut self, script: &str) -> Self {
        self.mode = RunMode {
            task: Some(TaskMode::default()),
            function: None,
        };
        self.source = Some(CodeSource {
            inline: Some(script.to_string()),
            ..Default::default()
        });
        self
    }

    /// A Task that runs `entrypoint` of the Git repository `url` at `commit` (the remote's
    /// default branch when `None`).
    pub fn git(mut self, url: &str, commit: Option<&str>, entrypoint: &str) -> Self {
        self.mode = RunMode {
            task: Some(TaskMode {
                entrypoint: Some(entrypoint.to_string()),
                ..Default::default()
            }),
            function: None,
        };
        self.source = Some(CodeSource {
            repo_url: Some(url.to_string()),
            commit_sha: commit.map(str::to_string),
            ..Default::default()
        });
        self
    }

    /// A function Run of `handler` whose code is `script`, written to `path`
    /// (`spec.source.inline` and `inlinePath`).
    pub fn inline_function(self, handler: &str, path: &str, script: &str) -> Self {
        let mut run = self.function(handler);
        run.source = Some(CodeSource {
            inline: Some(script.to_string()),
            inline_path: Some(path.to_string()),
            ..Default::default()
        });
        run
    }

    /// Adds an environment variable (`spec.env`).
    pub fn env(mut self, var: EnvVar) -> Self {
        self.env.push(var);
        self
    }

    fn task_mut(&mut self) -> &mut TaskMode {
        self.mode.task.get_or_insert_with(TaskMode::default)
    }

    /// `spec.mode.function.idleTimeoutSeconds` of a function Run.
    pub fn idle_timeout(mut self, seconds: i32) -> Self {
        if let Some(f) = self.mode.function.as_mut() {
            f.idle_timeout_seconds = Some(seconds);
        }
        self
    }

    /// A function Run (`spec.mode.function` with `handler`, no task), which runtimed without a
    /// runtime server cannot execute.
    pub fn function(mut self, handler: &str) -> Self {
        self.mode = RunMode {
            task: None,
            function: Some(FunctionMode {
                handler: Some(handler.to_string()),
                idle_timeout_seconds: None,
            }),
        };
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

    /// A required (anti-)affinity term with an arbitrary topology key and selector.
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

    /// Required affinity: placed only on a Runtime Pod with a Run labelled `labels`.
    pub fn requires(self, labels: &[(&str, &str)]) -> Self {
        self.affinity_term(false, LABEL_RUNTIME_POD, match_labels(labels))
    }

    /// Required anti-affinity: never placed on a Runtime Pod with a Run labelled `labels`.
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

    /// `spec.retryPolicy` of `max_attempts` attempts, the first pause `backoff`.
    pub fn retry_policy(mut self, max_attempts: i32, backoff: &str) -> Self {
        self.retry_policy = Some(RetryPolicy {
            max_attempts: Some(max_attempts),
            backoff: Some(backoff.to_string()),
            retryable_reasons: Vec::new(),
        });
        self
    }

    /// Running between two attempts: the failed attempt's `Running=False` since `since`,
    /// `status.attempt` the next one.
    pub fn between_attempts(mut self, next: i32, since: Timestamp) -> Self {
        self.phase = RunPhase::Running;
        self.attempt = Some(next);
        self.backoff_since = Some(since);
        self
    }

    /// Scheduled on `pod` (active); `status.assignedPodUID` stays unset unless `pod_uid` sets it.
    pub fn on(mut self, pod: &str) -> Self {
        self.phase = RunPhase::Scheduled;
        self.pod = Some(pod.to_string());
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn key(&self) -> RunKey {
        RunKey::of(&self.build())
    }

    /// The Run; it has no status while it is Pending and unbound, as when just created.
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
                mode: self.mode.clone(),
                source: self.source.clone(),
                env: self.env.clone(),
                workspace: self.workspace.clone().map(|name| RunWorkspaceReference {
                    name,
                    ..Default::default()
                }),
                priority_class_name: self.priority_class.clone(),
                timeout: self.timeout.clone(),
                cancel_requested: self.cancel_requested,
                ttl_seconds_after_finished: self.ttl,
                retry_policy: self.retry_policy.clone(),
            },
        );
        let meta = &mut run.metadata;
        meta.namespace = Some(self.namespace.clone());
        meta.uid = Some(uid_or_default(&self.uid, "uid", &self.name));
        meta.resource_version = self.resource_version.clone();
        meta.creation_timestamp = self.created.map(Time);
        meta.deletion_timestamp = self.deleting.then_some(Time(NOW));
        meta.labels = (!self.labels.is_empty()).then(|| self.labels.clone());
        meta.annotations = self.submitter.as_ref().map(|user| {
            BTreeMap::from([(
                crate::api::ANNOTATION_SUBMITTED_BY.to_string(),
                user.clone(),
            )])
        });
        let unbound = self.phase == RunPhase::Pending
            && self.pod.is_none()
            && self.pod_uid.is_none()
            && self.nominated.is_none()
            && self.priority.is_none();
        run.status = (!unbound).then(|| RunStatus {
            phase: Some(self.phase),
            assigned_pod: self.pod.clone(),
            assigned_pod_uid: self.pod_uid.clone(),
            nominated_pod_name: self.nominated.clone(),
            priority: self.priority,
            start_time: self.started.map(Time),
            attempt: self.attempt,
            conditions: self.conditions(),
            ..Default::default()
        });
        run
    }

    fn conditions(&self) -> Vec<Condition> {
        use crate::api::status::{self, reasons};
        let mut conditions = Vec::new();
        if self.disruption {
            status::set_condition(
                &mut conditions,
                status::CONDITION_DISRUPTION_TARGET,
                true,
                reasons::PREEMPTION_BY_SCHEDULER,
                "preempted",
                &Time(NOW),
            );
        }
        if let Some(at) = self.bound_at {
            status::set_condition(
                &mut conditions,
                status::CONDITION_SCHEDULED,
                true,
                reasons::SCHEDULED,
                "placed by the kruntimes scheduler",
                &Time(at),
            );
        }
        if let Some(since) = self.backoff_since {
            status::set_condition(
                &mut conditions,
                status::CONDITION_RUNNING,
                false,
                reasons::EXIT_CODE,
                "exited with code 1",
                &Time(since),
            );
        }
        conditions
    }

    /// The assumption Reserve would record for this Run on `pod`.
    pub fn assumption(&self, pod: &str) -> Assumption {
        let facts = RunFacts::of(&self.build());
        assert!(
            facts.invalid.is_none(),
            "an assumption is of a valid request"
        );
        Assumption {
            facts: std::sync::Arc::new(facts),
            pod: pod.to_string(),
            // Reserve resolves it against the cache's resource ids.
            held: Default::default(),
        }
    }
}
