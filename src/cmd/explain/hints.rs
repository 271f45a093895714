//! "What would change the verdict": short, actionable sentences computed from a [`Report`].
//!
//! Owns the advice only. Every fact it relies on (which filter rejected which Pod, usage,
//! capacity, affinity targets) was produced by the scheduler's own plugins in
//! [`super::report`]; this module must not decide feasibility itself. The one computation it
//! makes is arithmetic on shown numbers: how much would have to be released on a Pod that only
//! lacks capacity (`used + assumed + request - capacity`). Pure.

use std::collections::BTreeMap;

use super::model::{DecisionKind, PodReport, Report, TermKind};
use crate::api::status::reasons::INVALID_RESOURCES;
use crate::scheduler::plugins::run_affinity::{self, AFFINITY_MISMATCH};
use crate::scheduler::plugins::runtime_pod_availability::{
    self, DELETING, HEARTBEAT_MISSING, HEARTBEAT_NOT_HELD, HEARTBEAT_STALE, INVALID_CAPACITY,
    NOT_READY, RESERVED_FOR_EARLIER_RUN,
};

/// Release hints shown at most (the smallest releases first).
const MAX_RELEASE_HINTS: usize = 3;
/// Pod names listed in one sentence at most.
const MAX_NAMES: usize = 5;

/// The hints for `report`, most fundamental first: the Runtime, readiness, resources nobody
/// advertises, requests larger than any Pod, releases that would make the Run fit, Pod
/// availability, then affinity.
pub fn compute(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let rt = &report.runtime.name;
    if let (DecisionKind::Invalid, Some(invalid)) = (report.decision, &report.invalid) {
        let field = match invalid.field.as_str() {
            "" => "the field",
            field => field,
        };
        let why = if invalid.reason == INVALID_RESOURCES {
            "spec.resources is immutable and the scheduler fails an invalid Run for good"
        } else {
            "the scheduler fails an invalid Run for good"
        };
        out.push(format!(
            "fix {field} and recreate Run {}: {why}",
            report.run.name
        ));
        return out;
    }

    if report.run.deleting {
        out.push(format!(
            "Run {} is being deleted: the scheduler no longer places it",
            report.run.name
        ));
    }
    runtime_hints(report, &mut out);
    if report.decision == DecisionKind::Schedule {
        if !report.replayed && !report.run.deleting {
            out.push(format!(
                "the Run fits now: if it stays Pending, check that the scheduler (kubectl kruntimes scheduler run) is running and watches namespace {}",
                report.namespace
            ));
        }
        return out;
    }
    if report.pods.is_empty() {
        return out;
    }

    let ready = report
        .pods
        .iter()
        .filter(|p| p.ready && !p.terminating)
        .count();
    if ready == 0 {
        out.push(format!(
            "Runtime {rt} has 0 ready Pods (of {})",
            report.pods.len()
        ));
    }
    resource_hints(report, &mut out);
    release_hints(report, &mut out);
    availability_hints(report, ready == 0, &mut out);
    workspace_hints(report, &mut out);
    affinity_hints(report, &mut out);
    out
}

/// A Run whose workspace does not exist, or is bound to a Pod that cannot take it now.
fn workspace_hints(report: &Report, out: &mut Vec<String>) {
    let Some(w) = &report.workspace else { return };
    if !w.found {
        out.push(format!(
            "PersistentWorkspace {} not found in namespace {}: create it with spec.runtime: {} (the Run waits for it)",
            w.name, report.namespace, report.runtime.name
        ));
        return;
    }
    // Whichever filter rejected the other Pods first, only the bound one can take the Run.
    let Some(bound) = &w.bound_pod else { return };
    if report.decision != DecisionKind::Unschedulable {
        return;
    }
    match report.pods.iter().find(|p| &p.name == bound) {
        Some(pod) => {
            let why = pod
                .rejection
                .as_ref()
                .map_or("it cannot take the Run", |r| r.reason.as_str());
            out.push(format!(
                "PersistentWorkspace {} is bound to {bound}, so the Run waits for that Pod ({why}); no other Pod has its data",
                w.name
            ));
        }
        None => out.push(format!(
            "PersistentWorkspace {} is bound to {bound}, which is not a Runtime Pod of {} now: the Run waits for it, and fails once the workspace is marked Lost",
            w.name, report.runtime.name
        )),
    }
}

fn runtime_hints(report: &Report, out: &mut Vec<String>) {
    let rt = &report.runtime.name;
    match (report.runtime.found, report.pods.is_empty()) {
        (false, true) => out.push(format!(
            "Runtime {rt} not found in namespace {}: create it, or point spec.runtime of Run {} at an existing Runtime",
            report.namespace, report.run.name
        )),
        (true, true) => match report.runtime.replicas {
            Some(n) if n > 0 => out.push(format!(
                "Runtime {rt} wants {n} replicas but has no Runtime Pods: check that the kruntimes controller (kubectl kruntimes scheduler run) is running and can create Pods"
            )),
            _ => out.push(format!(
                "Runtime {rt} has no Runtime Pods: raise its spec.replicas (now 0)"
            )),
        },
        // Runtime Pods without a Runtime are used as they are; the table heading says so.
        (_, false) => {}
    }
}

/// Requested resources that no Pod advertises, or that exceed every Pod's capacity.
fn resource_hints(report: &Report, out: &mut Vec<String>) {
    let rt = &report.runtime.name;
    for (resource, &request) in &report.request {
        let capacities: Vec<u64> = report
            .pods
            .iter()
            .filter(|p| p.capacity_error.is_none())
            .filter_map(|p| use_of(p, resource).and_then(|u| u.capacity))
            .collect();
        match capacities.iter().max() {
            None if report.runtime.capacity.contains_key(resource) => out.push(format!(
                "Runtime {rt} declares {resource} in spec.capacity.resources but no Runtime Pod advertises it yet: the Runtime controller projects it onto the Pods' kruntimes.io/capacity.* annotations"
            )),
            None if report.runtime.found => out.push(format!(
                "no Runtime Pod advertises {resource}: add it to Runtime {rt}'s spec.capacity.resources"
            )),
            None => out.push(format!(
                "no Runtime Pod advertises {resource}: add a kruntimes.io/capacity annotation for it to the Runtime Pods (Runtime {rt} is not found, so nothing projects a spec.capacity onto them)"
            )),
            Some(&max) if request > max => out.push(format!(
                "the Run requests {request} {resource} but no Runtime Pod has more than {max}: raise spec.capacity.resources[{resource:?}] of Runtime {rt} (a Run's requests are immutable)"
            )),
            Some(_) => {}
        }
    }
}

/// Pods rejected only for lack of capacity: what would have to be released on them.
fn release_hints(report: &Report, out: &mut Vec<String>) {
    let mut groups: BTreeMap<Vec<(String, u64)>, Vec<&str>> = BTreeMap::new();
    for pod in &report.pods {
        let only_capacity = pod.filters.iter().all(|f| {
            f.passed || (f.plugin == runtime_pod_availability::NAME && f.resource.is_some())
        }) && pod.filters.iter().any(|f| !f.passed);
        if !only_capacity {
            continue;
        }
        let mut needed = Vec::new();
        let mut helps = true;
        for shortfall in &pod.shortfalls {
            match shortfall.to_release {
                Some(n) => needed.push((shortfall.resource.clone(), n)),
                None => helps = false,
            }
        }
        if helps && !needed.is_empty() {
            groups.entry(needed).or_default().push(&pod.name);
        }
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|(needed, pods)| {
        (
            needed.iter().map(|(_, n)| *n).sum::<u64>(),
            std::cmp::Reverse(pods.len()),
        )
    });
    for (needed, pods) in groups.into_iter().take(MAX_RELEASE_HINTS) {
        let amounts: Vec<String> = needed.iter().map(|(r, n)| format!("{n} {r}")).collect();
        let verb = if needed.len() == 1 && needed[0].1 == 1 {
            "is"
        } else {
            "are"
        };
        let where_ = match pods.as_slice() {
            [one] => one.to_string(),
            many => format!("any of {} ({})", count(many.len(), "Pod"), names(many)),
        };
        out.push(format!(
            "fits once {} {verb} released on {where_}",
            amounts.join(" and ")
        ));
    }
}

/// Pods the availability filter rejected before looking at capacity, grouped by reason.
fn availability_hints(report: &Report, none_ready: bool, out: &mut Vec<String>) {
    let mut by_reason: BTreeMap<&str, Vec<&PodReport>> = BTreeMap::new();
    for pod in &report.pods {
        if let Some(r) = &pod.rejection
            && r.plugin == runtime_pod_availability::NAME
            && r.resource.is_none()
        {
            by_reason.entry(r.code).or_default().push(pod);
        }
    }
    let order = [
        NOT_READY,
        DELETING,
        HEARTBEAT_MISSING,
        HEARTBEAT_NOT_HELD,
        HEARTBEAT_STALE,
        INVALID_CAPACITY,
        RESERVED_FOR_EARLIER_RUN,
    ];
    let mut reasons: Vec<&str> = by_reason.keys().copied().collect();
    reasons.sort_by_key(|r| order.iter().position(|o| o == r).unwrap_or(order.len()));
    for reason in reasons {
        let pods = &by_reason[reason];
        let list: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
        let (subject, verb) = (names(&list), if list.len() == 1 { "is" } else { "are" });
        let sentence = match reason {
            NOT_READY if none_ready => continue,
            NOT_READY => format!("{subject} {verb} not Ready"),
            DELETING => format!("{subject} {verb} terminating"),
            HEARTBEAT_MISSING => {
                format!("no runtimed heartbeat Lease for {subject}: check that runtimed runs there")
            }
            HEARTBEAT_NOT_HELD => format!(
                "the heartbeat Lease of {subject} is held by another identity (a previous Pod of the same name?): runtimed of the current Pod takes it over when it starts"
            ),
            HEARTBEAT_STALE => format!(
                "runtimed heartbeat stale on {subject}: check that runtimed runs there and can renew its Lease"
            ),
            INVALID_CAPACITY => format!(
                "the capacity annotations of {subject} cannot be read ({}): fix spec.capacity of Runtime {}",
                pods[0].capacity_error.as_deref().unwrap_or("invalid"),
                report.runtime.name
            ),
            RESERVED_FOR_EARLIER_RUN => format!(
                "{subject} {verb} being drained for an earlier Run that has waited longer than the starvation threshold (see its status.nominatedPodName): this Run fits there only after that one is placed"
            ),
            other => format!("{other}: {subject}"),
        };
        let fits: Vec<&str> = pods
            .iter()
            .filter(|p| would_fit_once_available(p))
            .map(|p| p.name.as_str())
            .collect();
        if fits.is_empty() {
            out.push(sentence);
        } else {
            out.push(format!(
                "{sentence}; the Run would fit on {} once available",
                names(&fits)
            ));
        }
    }
}

/// Every other filter passes and RuntimePodAvailability found no shortfall.
fn would_fit_once_available(pod: &PodReport) -> bool {
    pod.capacity_error.is_none()
        && pod
            .filters
            .iter()
            .all(|f| f.passed || f.plugin == runtime_pod_availability::NAME)
        && pod.shortfalls.is_empty()
}

fn affinity_hints(report: &Report, out: &mut Vec<String>) {
    let rejected_by = |reason: &str| {
        report.pods.iter().any(|p| {
            p.filters
                .iter()
                .any(|f| f.plugin == run_affinity::NAME && f.code == Some(reason))
        })
    };
    for term in &report.affinity {
        let pods: Vec<&str> = term.targets.iter().map(|t| t.pod.as_str()).collect();
        let mut runs: Vec<&str> = term
            .targets
            .iter()
            .flat_map(|t| t.runs.iter().map(String::as_str))
            .collect();
        runs.sort_unstable();
        runs.dedup();
        let (field, selector) = (&term.field, &term.selector);
        match term.kind {
            TermKind::Affinity if pods.is_empty() && !term.matches_self => {
                let how = if term.labels_only {
                    "labelled"
                } else {
                    "matching"
                };
                out.push(format!(
                    "needs a Run {how} {selector} to be placed first (required affinity {field}); this Run's own labels do not match it, so it cannot start the group"
                ));
            }
            TermKind::Affinity if !pods.is_empty() && rejected_by(AFFINITY_MISMATCH) => {
                out.push(format!(
                    "required affinity {field} ({selector}) holds only on {}, where {} {} placed",
                    names(&pods),
                    names(&runs),
                    if runs.len() == 1 { "is" } else { "are" }
                ));
            }
            TermKind::AntiAffinity if !pods.is_empty() => out.push(format!(
                "required anti-affinity {field} ({selector}) excludes {}, where {} {} placed: the Run fits there only once {} {}",
                names(&pods),
                names(&runs),
                if runs.len() == 1 { "is" } else { "are" },
                if runs.len() == 1 { "it" } else { "they" },
                if runs.len() == 1 { "ends" } else { "end" },
            )),
            _ => {}
        }
    }
    if !report.repelled_by.is_empty() {
        let pods: Vec<&str> = report.repelled_by.iter().map(|t| t.pod.as_str()).collect();
        let mut runs: Vec<&str> = report
            .repelled_by
            .iter()
            .flat_map(|t| t.runs.iter().map(String::as_str))
            .collect();
        runs.sort_unstable();
        runs.dedup();
        out.push(format!(
            "{} on {} {} required anti-affinity against this Run's labels",
            names(&runs),
            names(&pods),
            if runs.len() == 1 { "has" } else { "have" }
        ));
    }
}

fn use_of<'a>(pod: &'a PodReport, resource: &str) -> Option<&'a super::model::ResourceUse> {
    pod.resources.iter().find(|u| u.name == resource)
}

/// `1 Pod`, `2 Pods`.
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `a`, `a and b`, `a, b and c`, `a, b, c, d, e and 3 more`.
fn names(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        _ if items.len() > MAX_NAMES => format!(
            "{} and {} more",
            items[..MAX_NAMES].join(", "),
            items.len() - MAX_NAMES
        ),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::explain::report::{build, test_report, test_subject};
    use crate::testing::*;

    fn hints(pods: &[PodBuilder], runs: &[RunBuilder], run: &RunBuilder) -> Vec<String> {
        test_report(pods, runs, run).hints
    }

    #[test]
    fn a_shortage_says_how_much_must_be_released_and_where() {
        let gpu = [("runs", 4), ("example.com/gpu", 1)];
        let pods = [
            pod("p1").capacity(&gpu),
            pod("p2").capacity(&gpu),
            pod("p3").capacity(&[("runs", 4), ("example.com/gpu", 2)]),
        ];
        let busy = [
            run("x").requests(&[("example.com/gpu", 1)]).on("p1"),
            run("y").requests(&[("example.com/gpu", 1)]).on("p2"),
            run("z").requests(&[("example.com/gpu", 2)]).on("p3"),
        ];
        let got = hints(&pods, &busy, &run("a").requests(&[("example.com/gpu", 1)]));
        assert_eq!(
            got,
            ["fits once 1 example.com/gpu is released on any of 3 Pods (p1, p2 and p3)"]
        );
        let got = hints(&pods, &busy, &run("a").requests(&[("example.com/gpu", 2)]));
        assert_eq!(got, ["fits once 2 example.com/gpu are released on p3"]);
    }

    #[test]
    fn an_unadvertised_resource_names_the_runtime_field_to_change() {
        let pods = [pod("p1").capacity(&[("runs", 4)])];
        let r = run("a").requests(&[("example.com/tpu", 1)]);
        assert_eq!(
            hints(&pods, &[], &r),
            [
                "no Runtime Pod advertises example.com/tpu: add it to Runtime python's spec.capacity.resources"
            ]
        );
        let mut subject = test_subject(&pods, &[], &r);
        subject.objects.runtimes.clear();
        assert_eq!(
            build(&subject, &crate::scheduler::plugins::registry())
                .unwrap()
                .hints,
            [
                "no Runtime Pod advertises example.com/tpu: add a kruntimes.io/capacity annotation for it to the Runtime Pods (Runtime python is not found, so nothing projects a spec.capacity onto them)"
            ]
        );
        subject.objects.pods.clear();
        subject.objects.leases.clear();
        let report = build(&subject, &crate::scheduler::plugins::registry()).unwrap();
        assert_eq!(
            report.verdict,
            "Runtime \"python\" not found in this namespace; waiting for available runtime pods.",
            "the scheduler's message for a Run of a missing Runtime"
        );
        assert_eq!(
            report.hints,
            [
                "Runtime python not found in namespace default: create it, or point spec.runtime of Run a at an existing Runtime"
            ]
        );
    }

    #[test]
    fn a_request_larger_than_every_pod_asks_for_more_capacity() {
        let pods = [pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 2)])];
        let got = hints(&pods, &[], &run("a").requests(&[("example.com/gpu", 3)]));
        assert_eq!(
            got[0],
            "the Run requests 3 example.com/gpu but no Runtime Pod has more than 2: raise spec.capacity.resources[\"example.com/gpu\"] of Runtime python (a Run's requests are immutable)"
        );
        assert_eq!(got.len(), 1, "no release can help: {got:?}");
    }

    #[test]
    fn unavailable_pods_are_grouped_by_reason_and_say_where_the_run_would_fit() {
        let pods = [
            pod("p1").capacity(&[("runs", 4)]).stale(),
            pod("p2").capacity(&[("runs", 4)]).stale(),
            pod("p3").capacity(&[("runs", 0)]).no_lease(),
        ];
        let got = hints(&pods, &[], &run("a"));
        assert_eq!(
            got,
            [
                "no runtimed heartbeat Lease for p3: check that runtimed runs there",
                "runtimed heartbeat stale on p1 and p2: check that runtimed runs there and can renew its Lease; the Run would fit on p1 and p2 once available",
            ]
        );
    }

    #[test]
    fn no_ready_pod_is_said_once() {
        let pods = [pod("p1").not_ready(), pod("p2").not_ready()];
        let got = hints(&pods, &[], &run("a"));
        assert_eq!(got, ["Runtime python has 0 ready Pods (of 2)"]);
    }

    #[test]
    fn required_affinity_waiting_names_the_missing_labels() {
        let pods = [pod("p1").capacity(&[("runs", 4)])];
        let got = hints(&pods, &[], &run("a").requires(&[("cohort", "a")]));
        assert_eq!(
            got[0],
            "needs a Run labelled cohort=a to be placed first (required affinity spec.affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]); this Run's own labels do not match it, so it cannot start the group"
        );
    }

    #[test]
    fn anti_affinity_names_the_conflicting_runs_and_pods() {
        let pods = [
            pod("p1").capacity(&[("runs", 4)]),
            pod("p2").capacity(&[("runs", 4)]),
        ];
        let others = [
            run("s0").labels(&[("spread", "x")]).on("p1"),
            run("s1").labels(&[("spread", "x")]).on("p2"),
        ];
        let got = hints(&pods, &others, &run("a").anti(&[("spread", "x")]));
        assert_eq!(
            got[0],
            "required anti-affinity spec.affinity.runAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0] (spread=x) excludes p1 and p2, where s0 and s1 are placed: the Run fits there only once they end"
        );
        let repelling = [run("guard").anti(&[("app", "web")]).on("p1")];
        let got = hints(&pods[..1], &repelling, &run("a").labels(&[("app", "web")]));
        assert_eq!(
            got[0],
            "guard on p1 has required anti-affinity against this Run's labels"
        );
    }

    #[test]
    fn an_invalid_run_is_told_to_fix_the_field_and_recreate() {
        let got = hints(&[pod("p1")], &[], &run("a").request_strs(&[("runs", "-1")]));
        assert_eq!(
            got,
            [
                "fix spec.resources.requests[\"runs\"] and recreate Run a: spec.resources is immutable and the scheduler fails an invalid Run for good"
            ]
        );
    }

    #[test]
    fn a_run_waiting_for_its_workspace_is_told_which_pod_and_why() {
        let pods = [
            pod("p1").capacity(&[("runs", 1)]),
            pod("p2").capacity(&[("runs", 4)]),
        ];
        let busy = [run("kernel").workspace("nb").on("p1")];
        let r = run("cell").workspace("nb");
        let mut subject = test_subject(&pods, &busy, &r);
        subject.objects.workspaces = vec![workspace("nb").bound("p1").build()];
        let report = build(&subject, &crate::scheduler::plugins::registry()).unwrap();
        let w = report.workspace.as_ref().unwrap();
        assert_eq!(
            (w.found, w.phase.as_deref(), w.bound_pod.as_deref()),
            (true, Some("Bound"), Some("p1"))
        );
        assert!(
            report.hints.contains(&"PersistentWorkspace nb is bound to p1, so the Run waits for that Pod (Insufficient runs); no other Pod has its data".to_string()),
            "{:?}",
            report.hints
        );
        let text =
            crate::cmd::explain::render::text(&report, false, &crate::output::Palette::plain());
        assert!(text.contains("Workspace: nb, bound to p1."), "{text}");

        // Not created yet: the Run waits for it, and is told to create it.
        let report = test_report(&pods, &[], &r);
        assert!(!report.workspace.as_ref().unwrap().found);
        assert_eq!(
            report.hints,
            [
                "PersistentWorkspace nb not found in namespace default: create it with spec.runtime: python (the Run waits for it)"
            ]
        );
        assert_eq!(
            report.verdict,
            "0/2 Runtime Pods are available: 2 PersistentWorkspace not found."
        );
    }

    #[test]
    fn names_are_listed_in_english_and_capped() {
        assert_eq!(names(&["a"]), "a");
        assert_eq!(names(&["a", "b", "c"]), "a, b and c");
        assert_eq!(
            names(&["a", "b", "c", "d", "e", "f", "g"]),
            "a, b, c, d, e and 2 more"
        );
    }
}
