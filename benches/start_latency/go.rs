//! The Go kruntimes project's stack on the same shapes, for `--go GIT_DIR`: its scheduler, one
//! runtimed and one Bash runtime server per Runtime Pod, as processes (built unchanged by
//! `../shared/tools/build-go-kruntimes.sh`), on a control plane of its own with its CRDs.
//!
//! Its Runtime Pods are played as ours are: Pod objects labelled `runtime=<name>` with the
//! capacity annotation, Running and Ready through the status subresource; its runtimed then
//! heartbeats in the Pod's `kruntimes.io/RuntimedReady` condition. Its Runs are those of its
//! own benchmark (`hack/benchmark`): `spec.runtime` and a task whose args Bash runs.
//!
//! Its "runtimed" CPU is each Pod's runtimed and Bash runtime server together (ours runs
//! tasks itself; theirs hands them to the server), so the unit compared is what serves a Pod.
//!
//! Must not touch the bench's own control plane: the two projects' CRDs share a group.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher;
use serde_json::json;

use super::{Burst, Figures, Shape, cpu};
use crate::support::{self, measure::api_requests, world::eventually};

const NAMESPACE: &str = "bench";
const RUNTIME: &str = "benchmark-bash";

/// The built binaries and the CRDs of one commit of the Go project.
pub struct GoStack {
    bin: PathBuf,
    crds: PathBuf,
    pub commit: String,
}

impl GoStack {
    /// Builds (or finds cached) the binaries of `git_dir`'s HEAD and extracts its CRDs.
    pub fn prepare(git_dir: &Path) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/build-go-kruntimes.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(git_dir)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
        assert!(out.status.success(), "{} failed", script.display());
        let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let commit = bin.file_name().unwrap().to_string_lossy().into_owned();
        let crds = bin.join("crds");
        std::fs::create_dir_all(&crds).unwrap();
        let archive = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "git --git-dir={} archive HEAD charts/kruntimes/crds | tar -x -C {} --strip-components=3",
                git_dir.display(),
                crds.display()
            ))
            .status()
            .unwrap();
        assert!(archive.success(), "extract the Go project's CRDs");
        GoStack { bin, crds, commit }
    }

    fn spawn(&self, name: &str, args: &[String], env: &[(&str, String)], log: &Path) -> Child {
        let log = std::fs::File::create(log).unwrap();
        let mut command = Command::new(self.bin.join(name));
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        command
            .spawn()
            .unwrap_or_else(|e| panic!("start the Go {name}: {e}"))
    }

    /// One measurement of `shape` on `cp` (a control plane of its own; its kube-apiserver and
    /// etcd are `control_plane`, etcd first).
    pub async fn measure(
        &self,
        shape: &Shape,
        cp: &support::ControlPlane,
        control_plane: &[u32],
    ) -> Figures {
        let applied = Command::new(cp.bin_dir.join("kubectl"))
            .env("KUBECONFIG", &cp.kubeconfig)
            .args(["apply", "--server-side", "-f"])
            .arg(&self.crds)
            .output()
            .unwrap();
        assert!(
            applied.status.success(),
            "apply the Go project's CRDs: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
        let client = support::client_for(&cp.kubeconfig).await;
        let runs_resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kruntimes.io", "v1alpha1", "Run"),
            "runs",
        );
        let runs: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), NAMESPACE, &runs_resource);
        eventually(
            Duration::from_secs(30),
            "the Go Run CRD served",
            async || {
                runs.list(&Default::default())
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
        )
        .await;
        let namespace =
            serde_json::from_value::<Namespace>(json!({"metadata": {"name": NAMESPACE}}));
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace.unwrap())
            .await
            .expect("create the namespace");
        std::fs::create_dir_all("/workspace").expect("the Go runtimed's /workspace");

        let logs = cp.dir.join("go-logs");
        std::fs::create_dir_all(&logs).unwrap();
        let kubeconfig = cp.kubeconfig.display().to_string();
        // Killed when dropped, a panic of this measurement included.
        let mut children = Children(Vec::new());
        let mut runtimed_pids = Vec::new();
        for i in 0..shape.pods {
            let name = create_pod(&client, i, shape.capacity).await;
            let port = || support::free_port().to_string();
            let (server, metrics, status, health) = (port(), port(), port(), port());
            let runtime = self.spawn(
                "bash-runtime",
                &[format!("--port={server}"), "--work-dir=/workspace".into()],
                &[],
                &logs.join(format!("bash-runtime-{i}.log")),
            );
            let runtimed = self.spawn(
                "runtimed",
                &[
                    format!("--runtime-endpoint=127.0.0.1:{server}"),
                    format!("--runtime-name={RUNTIME}"),
                    format!("--workers={}", shape.capacity),
                    format!("--metrics-bind-address=127.0.0.1:{metrics}"),
                    format!("--status-addr=127.0.0.1:{status}"),
                    format!("--health-probe-bind-address=127.0.0.1:{health}"),
                ],
                &[
                    ("HOSTNAME", name),
                    ("POD_NAMESPACE", NAMESPACE.into()),
                    ("KUBECONFIG", kubeconfig.clone()),
                ],
                &logs.join(format!("runtimed-{i}.log")),
            );
            runtimed_pids.extend([runtimed.id(), runtime.id()]);
            children.0.extend([runtime, runtimed]);
        }
        let scheduler = self.spawn(
            "scheduler",
            &[
                format!("--metrics-bind-address=127.0.0.1:{}", support::free_port()),
                format!(
                    "--health-probe-bind-address=127.0.0.1:{}",
                    support::free_port()
                ),
            ],
            &[("KUBECONFIG", kubeconfig.clone())],
            &logs.join("scheduler.log"),
        );
        let scheduler_pid = scheduler.id();
        children.0.push(scheduler);

        // Ready: every Pod heartbeats, so start-up is not measured.
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        eventually(
            Duration::from_secs(60),
            "the Go runtimeds' RuntimedReady heartbeats",
            async || {
                let list = pods
                    .list(&Default::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let ready = list
                    .items
                    .iter()
                    .filter(|p| {
                        p.status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|c| {
                                c.iter().any(|c| {
                                    c.type_ == "kruntimes.io/RuntimedReady" && c.status == "True"
                                })
                            })
                    })
                    .count();
                if ready == shape.pods {
                    Ok(())
                } else {
                    Err(format!("{ready} ready"))
                }
            },
        )
        .await;

        let seen = Seen::start(runs.clone()).await;
        let requests_before = api_requests(cp);
        let before = cpu(scheduler_pid, &runtimed_pids, control_plane);
        let task = shape.task.join(" ");
        let burst = Burst::create(shape, |i| {
            let runs = runs.clone();
            let name = format!("r-{i:04}");
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "kruntimes.io/v1alpha1",
                "kind": "Run",
                "metadata": {"name": name},
                "spec": {"runtime": RUNTIME, "mode": {"task": {"args": [task]}}},
            }))
            .unwrap();
            async move {
                runs.create(&PostParams::default(), &object)
                    .await
                    .unwrap_or_else(|e| panic!("create the Go Run {name}: {e}"));
                name
            }
        })
        .await;
        let done = burst
            .all_ended("Go Runs", || seen.first(|phase| TERMINAL.contains(&phase)))
            .await;
        let after = cpu(scheduler_pid, &runtimed_pids, control_plane);
        let requests = super::per_run(requests_before, api_requests(cp), shape.runs);
        let failed = seen.first(|phase| phase != "Succeeded" && TERMINAL.contains(&phase));
        assert!(
            failed.is_empty(),
            "Go Runs that did not succeed: {:?} (logs in {})",
            failed.keys().collect::<Vec<_>>(),
            logs.display()
        );
        let scheduled = seen.first(|phase| !phase.is_empty() && phase != "Pending");
        let started = seen.first(|phase| !matches!(phase, "" | "Pending" | "Scheduled"));
        super::dump_one(&runs, "r-0000").await;
        drop(children);
        Figures::from_times(burst, [scheduled, started, done], [before, after], requests)
    }
}

const TERMINAL: [&str; 4] = ["Succeeded", "Failed", "Timeout", "Cancelled"];

/// Kills the processes when dropped.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A Runtime Pod as the Go project's Deployment would make it, Running and Ready. Returns
/// its name.
async fn create_pod(client: &Client, i: usize, capacity: u64) -> String {
    let name = format!("rt-{i}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"runtime": RUNTIME},
            "annotations": {"kruntimes.io/capacity.runs": capacity.to_string()},
        },
        "spec": {"containers": [{"name": "runtime", "image": "kruntimes-bash-runtime"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create the Go Runtime Pod {name}: {e}"));
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
    }});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("write the status of the Go Runtime Pod {name}: {e}"));
    name
}

/// When a watch first saw each Run in each phase (`""` before any status).
struct Seen {
    phases: Arc<Mutex<Vec<(String, String, Instant)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Seen {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Seen {
    /// Watches `runs`; returns once the watch has listed.
    async fn start(runs: Api<DynamicObject>) -> Self {
        let phases: Arc<Mutex<Vec<(String, String, Instant)>>> = Arc::default();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let sink = phases.clone();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(runs, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let object = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                    Ok(watcher::Event::InitDone) => {
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(());
                        }
                        continue;
                    }
                    _ => continue,
                };
                let phase = object.data["status"]["phase"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let name = object.metadata.name.unwrap_or_default();
                sink.lock().unwrap().push((name, phase, Instant::now()));
            }
        });
        let _ = ready_rx.await;
        Seen { phases, task }
    }

    /// Per Run, when a phase that `matches` was first seen.
    fn first(&self, matches: impl Fn(&str) -> bool) -> HashMap<String, Instant> {
        let mut first = HashMap::new();
        for (name, phase, at) in self.phases.lock().unwrap().iter() {
            if matches(phase) {
                first.entry(name.clone()).or_insert(*at);
            }
        }
        first
    }
}
