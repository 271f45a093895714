//! `dev --demo`: applies examples/ (embedded in the binary), shows the Runs by phase until they
//! all finish, and prints what `explain` said about a Run while it had to wait.
//!
//! [`Tally`] is the pure part (counting phases, noticing waits and first completions); [`run`]
//! feeds it from a watch of the demo namespace.

use std::collections::BTreeMap;
use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{
    Api, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::discovery::Scope;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::api::status::reasons;
use crate::api::{FIELD_MANAGER, Run, RunPhase};

/// The namespace every example lives in.
pub const NAMESPACE: &str = "kruntimes-demo";

/// examples/, in the order `kubectl apply -f examples/` applies them.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "examples/00-namespace.yaml",
        include_str!("../../../examples/00-namespace.yaml"),
    ),
    (
        "examples/10-runtime.yaml",
        include_str!("../../../examples/10-runtime.yaml"),
    ),
    (
        "examples/20-runs.yaml",
        include_str!("../../../examples/20-runs.yaml"),
    ),
    (
        "examples/30-affinity.yaml",
        include_str!("../../../examples/30-affinity.yaml"),
    ),
];

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the demo could not run to the end.
#[derive(Debug, Error)]
pub enum Error {
    #[error("{file}: {reason}")]
    Example { file: &'static str, reason: String },
    #[error("{doing}: {source}")]
    Kube {
        doing: String,
        #[source]
        source: kube::Error,
    },
    #[error("the demo's Runs did not all finish within {}s ({tally}); see `kubectl get runs -n {NAMESPACE}`", timeout.as_secs())]
    Timeout { timeout: Duration, tally: String },
    #[error("{} of {total} demo Runs failed ({}); see `kubectl describe run NAME -n {NAMESPACE}`", failed.len(), failed.join(", "))]
    RunsFailed { failed: Vec<String>, total: usize },
    #[error("the watch of the demo's Runs ended")]
    WatchEnded,
}

fn kube_err(doing: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let doing = doing.into();
    move |source| Error::Kube { doing, source }
}

/// Every object of examples/, in apply order.
pub fn objects() -> Result<Vec<(&'static str, DynamicObject)>> {
    let mut out = Vec::new();
    for (file, text) in EXAMPLES {
        let docs =
            crate::util::yaml::documents(text).map_err(|reason| Error::Example { file, reason })?;
        for value in docs {
            if value.is_null() {
                continue;
            }
            let obj: DynamicObject = serde_json::from_value(value).map_err(|e| Error::Example {
                file,
                reason: e.to_string(),
            })?;
            if obj.types.is_none() {
                return Err(Error::Example {
                    file,
                    reason: "a document without apiVersion/kind".into(),
                });
            }
            out.push((*file, obj));
        }
    }
    Ok(out)
}

/// Names of the Runs in examples/.
pub fn run_names() -> Result<Vec<String>> {
    Ok(objects()?
        .into_iter()
        .filter(|(_, o)| o.types.as_ref().is_some_and(|t| t.kind == "Run"))
        .map(|(_, o)| o.name_any())
        .collect())
}

/// Phases of the demo's Runs, and what happened to them so far. Pure.
#[derive(Debug, Default)]
pub struct Tally {
    phases: BTreeMap<String, RunPhase>,
    /// Runs seen Pending as Unschedulable, in the order they were first seen so.
    pub waited: Vec<String>,
    /// Runs seen waiting for room on Runtime Pods that exist (each reported once).
    noticed: std::collections::BTreeSet<String>,
    /// How many Runs are done, and when the first one finished (since the start given to
    /// [`Tally::observe`]).
    pub first_finished: Option<Duration>,
}

impl Tally {
    pub fn new(names: &[String]) -> Self {
        Tally {
            phases: names
                .iter()
                .map(|n| (n.clone(), RunPhase::Pending))
                .collect(),
            ..Default::default()
        }
    }

    /// Records one observed Run; returns true when it is seen waiting for room on Runtime Pods
    /// that exist (not in the moment before the Runtime controller has created any: "0/0
    /// Runtime Pods" explains nothing about capacity).
    pub fn observe(&mut self, run: &Run, elapsed: Duration) -> bool {
        let name = run.name_any();
        let Some(phase) = self.phases.get_mut(&name) else {
            return false;
        };
        *phase = run.phase();
        if phase.is_terminal() && self.first_finished.is_none() {
            self.first_finished = Some(elapsed);
        }
        let unschedulable = run.phase() == RunPhase::Pending
            && matches!(
                run.status.as_ref().and_then(|s| s.reason.as_deref()),
                Some(reasons::UNSCHEDULABLE | reasons::NOMINATED)
            );
        if unschedulable && !self.waited.contains(&name) {
            self.waited.push(name.clone());
        }
        let no_pods = run
            .status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .is_some_and(|m| m.starts_with("0/0 "));
        unschedulable && !no_pods && self.noticed.insert(name)
    }

    pub fn total(&self) -> usize {
        self.phases.len()
    }

    pub fn finished(&self) -> usize {
        self.phases.values().filter(|p| p.is_terminal()).count()
    }

    pub fn failed(&self) -> Vec<String> {
        self.phases
            .iter()
            .filter(|(_, p)| **p == RunPhase::Failed)
            .map(|(n, _)| n.clone())
            .collect()
    }

    pub fn done(&self) -> bool {
        self.finished() == self.total()
    }

    fn count(&self, phase: RunPhase) -> usize {
        self.phases.values().filter(|p| **p == phase).count()
    }
}

impl std::fmt::Display for Tally {
    /// `Pending 3 · Scheduled 0 · Running 6 · Succeeded 4 · Failed 0`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The phases the demo's task Runs pass through; the others only when they occur.
        let usual = [
            RunPhase::Pending,
            RunPhase::Scheduled,
            RunPhase::Running,
            RunPhase::Succeeded,
            RunPhase::Failed,
        ];
        let parts: Vec<String> = RunPhase::ALL
            .into_iter()
            .filter(|p| usual.contains(p) || self.count(*p) > 0)
            .map(|p| format!("{p:?} {}", self.count(p)))
            .collect();
        write!(f, "{}", parts.join(" · "))
    }
}

/// What the demo needs from `dev`.
pub struct Context<'a> {
    pub client: Client,
    pub kubeconfig: &'a Path,
    /// The binary, to run `explain` exactly as a user would.
    pub exe: PathBuf,
    /// When `dev` started (the first finished Run is reported relative to it).
    pub started: Instant,
    pub timeout: Duration,
}

/// Applies examples/, follows the Runs to the end and prints the story. Fails when a Run
/// fails or the Runs do not finish within the timeout.
pub async fn run(ctx: Context<'_>) -> Result<()> {
    let mut out = std::io::stdout();
    let runs: Api<Run> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let leftovers = runs
        .list(&ListParams::default())
        .await
        .map_err(kube_err("cannot list the Runs of an earlier demo"))?;
    if !leftovers.items.is_empty() {
        let _ = writeln!(
            out,
            "Deleting the {} Runs an earlier demo left in namespace {NAMESPACE}.",
            leftovers.items.len()
        );
        runs.delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .map_err(kube_err("cannot delete the Runs of an earlier demo"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let left = runs
                .list(&ListParams::default())
                .await
                .map_err(kube_err("cannot list the Runs of an earlier demo"))?;
            if left.items.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    let objects = objects()?;
    let names = run_names()?;
    let demo_started = Instant::now();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (file, obj) in &objects {
        apply(&ctx.client, file, obj).await?;
        let kind = obj
            .types
            .as_ref()
            .map(|t| t.kind.clone())
            .unwrap_or_default();
        *kinds.entry(kind).or_default() += 1;
    }
    let applied: Vec<String> = kinds
        .iter()
        .map(|(k, n)| format!("{n} {k}{}", if *n == 1 { "" } else { "s" }))
        .collect();
    let _ = writeln!(
        out,
        "Applied examples/ ({}) in namespace {NAMESPACE}.\n",
        applied.join(", ")
    );

    let mut tally = Tally::new(&names);
    let bar = progress_bar(tally.total());
    let mut explain: Option<(String, tokio::task::JoinHandle<String>)> = None;
    let mut events = watcher(runs, watcher::Config::default())
        .default_backoff()
        .boxed();
    let deadline = tokio::time::Instant::now() + ctx.timeout;
    let mut last_line = String::new();
    while !tally.done() {
        let event = tokio::select! {
            e = events.next() => e,
            _ = tokio::time::sleep_until(deadline) => {
                bar.abandon();
                return Err(Error::Timeout { timeout: ctx.timeout, tally: tally.to_string() });
            }
        };
        let run = match event {
            Some(Ok(Event::Apply(run) | Event::InitApply(run))) => run,
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                tracing::warn!("watching the demo's Runs: {e}; retrying");
                continue;
            }
            None => return Err(Error::WatchEnded),
        };
        if tally.observe(&run, ctx.started.elapsed()) && explain.is_none() {
            let name = run.name_any();
            explain = Some((
                name.clone(),
                tokio::spawn(explain_now(
                    ctx.exe.clone(),
                    ctx.kubeconfig.to_path_buf(),
                    name,
                )),
            ));
        }
        let line = format!(
            "{}/{} Runs finished · {tally}",
            tally.finished(),
            tally.total()
        );
        if line != last_line {
            if bar.is_hidden() {
                let _ = writeln!(
                    out,
                    "[{:>5.1}s] {line}",
                    demo_started.elapsed().as_secs_f64()
                );
            } else {
                bar.set_position(tally.finished() as u64);
                bar.set_message(tally.to_string());
            }
            last_line = line;
        }
    }
    if !bar.is_hidden() {
        bar.finish();
        let _ = writeln!(out);
    }

    let _ = writeln!(
        out,
        "\nAll {} Runs finished {:.1}s after they were applied ({} Succeeded, {} Failed); the first finished {:.1}s after `dev` started.",
        tally.total(),
        demo_started.elapsed().as_secs_f64(),
        tally.count(RunPhase::Succeeded),
        tally.count(RunPhase::Failed),
        tally.first_finished.unwrap_or_default().as_secs_f64(),
    );
    if tally.waited.is_empty() {
        let _ = writeln!(out, "No Run had to wait this time.");
    } else {
        let _ = writeln!(out, "Runs that had to wait: {}.", tally.waited.join(", "));
    }
    if let Some((name, handle)) = explain {
        let said = match tokio::time::timeout(Duration::from_secs(30), handle).await {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => format!("(explain did not run: {e})"),
            Err(_) => "(explain did not answer within 30s)".into(),
        };
        let _ = writeln!(
            out,
            "\nWhile {name} waited, `kubectl kruntimes explain run/{name} -n {NAMESPACE}` said:\n\n{}",
            said.trim_end()
        );
    }
    let _ = out.flush();
    let failed = tally.failed();
    if !failed.is_empty() {
        return Err(Error::RunsFailed {
            failed,
            total: tally.total(),
        });
    }
    Ok(())
}

fn progress_bar(total: usize) -> indicatif::ProgressBar {
    if !std::io::stdout().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total as u64),
        indicatif::ProgressDrawTarget::stdout(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "[{elapsed:>3}] {bar:20.cyan/blue} {pos}/{len} Runs finished · {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Server-side applies one example object.
async fn apply(client: &Client, file: &'static str, obj: &DynamicObject) -> Result<()> {
    let types = obj.types.as_ref().expect("checked in objects()");
    let gvk = GroupVersionKind::try_from(types).map_err(|e| Error::Example {
        file,
        reason: e.to_string(),
    })?;
    let name = obj.name_any();
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(kube_err(format!(
            "cannot find the API of {} {name}",
            gvk.kind
        )))?;
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            obj.namespace().as_deref().unwrap_or(NAMESPACE),
            &resource,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map_err(kube_err(format!(
        "cannot apply {} {name} from {file}",
        gvk.kind
    )))?;
    Ok(())
}

/// Runs `explain run/NAME` as a user would and returns what it printed.
async fn explain_now(exe: PathBuf, kubeconfig: PathBuf, name: String) -> String {
    let out = tokio::process::Command::new(exe)
        .args(["explain", &format!("run/{name}"), "-n", NAMESPACE])
        .args(["--color", "never"])
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await;
    match out {
        Ok(o) => {
            let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            text
        }
        Err(e) => format!("(cannot run explain: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(name: &str, phase: &str, reason: Option<&str>) -> Run {
        serde_json::from_value(json!({
            "apiVersion": "kruntimes.io/v1alpha1", "kind": "Run",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"runtime": "python"},
            "status": {"phase": phase, "reason": reason},
        }))
        .unwrap()
    }

    #[test]
    fn examples_hold_one_runtime_of_three_gpu_pods_and_a_mixed_batch() {
        let objects = objects().unwrap();
        let runtime = objects
            .iter()
            .find(|(_, o)| o.types.as_ref().unwrap().kind == "Runtime")
            .map(|(_, o)| o.data["spec"].clone())
            .unwrap();
        assert_eq!(runtime["replicas"], 3);
        assert_eq!(runtime["capacity"]["resources"]["runs"], "4");
        assert_eq!(runtime["capacity"]["resources"]["example.com/gpu"], "1");
        for (_, o) in &objects {
            if o.types.as_ref().unwrap().kind != "Namespace" {
                assert_eq!(
                    o.namespace().as_deref(),
                    Some(NAMESPACE),
                    "{}",
                    o.name_any()
                );
            }
        }
        let runs: Vec<Run> = objects
            .iter()
            .filter(|(_, o)| o.types.as_ref().unwrap().kind == "Run")
            .map(|(_, o)| serde_json::from_value(serde_json::to_value(o).unwrap()).unwrap())
            .collect();
        let gpu = runs
            .iter()
            .filter(|r| {
                r.spec
                    .resources
                    .as_ref()
                    .is_some_and(|res| res.requests.contains_key("example.com/gpu"))
            })
            .count();
        assert!(gpu > 3, "more GPU Runs than GPUs, so some wait");
        assert!(runs.len() > gpu, "CPU-only Runs too");
        assert!(
            runs.iter().any(|r| r.spec.affinity.is_some()),
            "an affinity cohort"
        );
    }

    #[test]
    fn tally_counts_phases_and_notices_the_first_wait_once() {
        let names: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let mut t = Tally::new(&names);
        assert!(t.observe(
            &run("a", "Pending", Some("Unschedulable")),
            Duration::from_secs(1)
        ));
        assert!(!t.observe(
            &run("a", "Pending", Some("Unschedulable")),
            Duration::from_secs(2)
        ));
        assert!(!t.observe(
            &run("zzz", "Pending", Some("Unschedulable")),
            Duration::ZERO
        ));
        // Waiting before any Runtime Pod exists counts as a wait, not as one to explain.
        let mut early = run("b", "Pending", Some("Unschedulable"));
        early.status.as_mut().unwrap().message =
            Some("0/0 Runtime Pods are available; waiting for available runtime pods.".into());
        assert!(!t.observe(&early, Duration::ZERO));
        assert_eq!(t.waited, ["a", "b"]);
        t.observe(&run("b", "Succeeded", None), Duration::from_secs(3));
        assert_eq!(t.first_finished, Some(Duration::from_secs(3)));
        assert!(!t.done());
        t.observe(&run("a", "Failed", None), Duration::from_secs(5));
        assert!(t.done());
        assert_eq!(t.failed(), ["a"]);
        assert_eq!(t.first_finished, Some(Duration::from_secs(3)));
        assert_eq!(
            t.to_string(),
            "Pending 0 · Scheduled 0 · Running 0 · Succeeded 1 · Failed 1"
        );
    }
}
