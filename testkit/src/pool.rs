//! One Runtime hosted by the test: the Runtime controller of a running scheduler makes its
//! Pods, the test plays the kubelet (marks each Ready) and starts a real runtimed per Pod.
//!
//! Owns the runtimeds, each Pod's capacity as its `kruntimes.io/capacity` annotations
//! advertise it (what the overcommit watch judges by, so a test cannot assume a capacity the
//! Pods do not have), and the gates of held Runs. It starts no scheduler (the caller starts
//! one first: without it there are no Pods) and asserts nothing of the scenario.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use kruntimes::api::resources::parse_capacity_annotations;
use kruntimes::api::{Resources, Run, RunPhase};
use kruntimes::testing::{RunBuilder, run, runtime};

use super::gates::Gates;
use super::world::{Create, OvercommitWatch, RuntimedProcess, TestNs};

/// runtimed renews its heartbeat every second for 10 s: a stopped agent is noticed within
/// seconds, a slow test machine does not lose a live one.
pub const HEARTBEAT: [&str; 4] = ["--heartbeat-interval", "1s", "--heartbeat-duration", "10s"];

/// A Runtime's Pods, each Ready with its runtimed.
pub struct Pool {
    pub ns: TestNs,
    /// The Runtime's name (its Runs' `spec.runtime`).
    pub runtime: String,
    /// The live runtimeds by Pod name; a test that kills one removes it.
    pub agents: BTreeMap<String, RuntimedProcess>,
    /// Each hosted Pod's capacity; a test that deletes a Pod removes it.
    pub capacity: HashMap<String, Resources>,
    /// The gates of [`Pool::held`] Runs.
    pub gates: Gates,
    /// Each hosted Pod, to start its runtimed again.
    pods: BTreeMap<String, Pod>,
    /// The flags every runtimed of the pool starts with.
    args: Vec<String>,
    /// More environment variables for each runtimed.
    env: Vec<(String, String)>,
    /// How long [`Pool::until`] waits.
    patience: Duration,
}

impl Pool {
    /// Creates Runtime `name` of `replicas` Pods with `capacity` in `ns` and hosts each Pod
    /// with a runtimed started with `args`.
    pub async fn start(
        ns: &TestNs,
        name: &str,
        replicas: usize,
        capacity: &[(&str, u64)],
        args: &[&str],
    ) -> Self {
        Self::start_with_env(ns, name, replicas, capacity, args, &[]).await
    }

    /// [`Pool::start`] with more environment variables for each runtimed.
    pub async fn start_with_env(
        ns: &TestNs,
        name: &str,
        replicas: usize,
        capacity: &[(&str, u64)],
        args: &[&str],
        env: &[(String, String)],
    ) -> Self {
        runtime(name)
            .replicas(i32::try_from(replicas).expect("a replica count"))
            .capacity(capacity)
            .create(ns)
            .await;
        let mut pool = Pool::empty(ns, name, args);
        pool.env = env.to_vec();
        for pod in ns.runtime_pods(name, replicas).await {
            pool.host(&pod).await;
        }
        pool
    }

    /// A pool of Runtime `name` that hosts no Pod yet and creates no Runtime: the test makes
    /// the Pods itself and hosts or [counts](Pool::count) each.
    pub fn empty(ns: &TestNs, name: &str, args: &[&str]) -> Self {
        Pool {
            ns: ns.clone(),
            runtime: name.to_string(),
            agents: BTreeMap::new(),
            capacity: HashMap::new(),
            gates: Gates::new(&ns.name),
            pods: BTreeMap::new(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            patience: Duration::from_secs(60),
        }
    }

    /// Records `pod`'s advertised capacity, for the overcommit watch, without hosting it.
    pub fn count(&mut self, pod: &Pod) {
        let name = pod.name_any();
        let capacity = parse_capacity_annotations(pod.annotations())
            .unwrap_or_else(|e| panic!("Pod {name} advertises no readable capacity: {e}"));
        self.capacity.insert(name.clone(), capacity);
        self.pods.insert(name, pod.clone());
    }

    /// Marks `pod` Ready, records its advertised capacity and starts its runtimed.
    pub async fn host(&mut self, pod: &Pod) {
        self.ns.set_ready(&pod.name_any(), true).await;
        self.count(pod);
        self.restart(&pod.name_any());
    }

    /// Starts `pod`'s runtimed (again), with the pool's flags; a runtimed still held for it
    /// is dropped, which stops it.
    pub fn restart(&mut self, pod: &str) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let kubeconfig = &crate::control_plane().kubeconfig;
        let agent = RuntimedProcess::start_with_env(kubeconfig, &self.pods[pod], &args, &self.env);
        self.agents.insert(pod.to_string(), agent);
    }

    /// The only Pod's name, for pools of one.
    pub fn pod(&self) -> &str {
        let mut names = self.pods.keys();
        match (names.next(), names.next()) {
            (Some(name), None) => name,
            _ => panic!("pool of {} Pods has no single Pod", self.pods.len()),
        }
    }

    /// The only runtimed, for pools of one.
    pub fn agent(&self) -> &RuntimedProcess {
        &self.agents[self.pod()]
    }

    /// A watch of every Run event of the namespace, judged by the hosted Pods' capacity.
    pub async fn overcommit_watch(&self) -> OvercommitWatch {
        OvercommitWatch::start(&self.ns, self.capacity.clone()).await
    }

    /// A Run of the pool's Runtime.
    pub fn run(&self, name: &str) -> RunBuilder {
        run(name).runtime(&self.runtime)
    }

    /// A Run of the pool that runs until the test opens its gate ([`Pool::open`] with its
    /// name, or `all`), so it is still running when the test acts on it however slowly the
    /// test gets there.
    pub fn held(&self, name: &str) -> RunBuilder {
        self.run(name).task(&["sh", "-c", &self.gates.hold(name)])
    }

    /// Opens the gate `name` (a held Run's, or `all`).
    pub fn open(&self, name: &str) {
        self.gates.open(name);
    }

    /// Sets how long [`Pool::until`] waits (60 s unless set).
    pub fn patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// Creates `n` Runs of the pool named `<prefix>-NN` of `sh -c <script>`.
    pub async fn runs(&self, prefix: &str, n: usize, script: &str) -> Vec<String> {
        let mut names = Vec::new();
        for i in 0..n {
            let name = format!("{prefix}-{i:02}");
            self.run(&name)
                .task(&["sh", "-c", script])
                .create(&self.ns)
                .await;
            names.push(name);
        }
        names
    }

    /// Waits until `check` holds over the namespace's Runs.
    pub async fn until<T>(&self, what: &str, check: impl FnMut(&[Run]) -> Option<T>) -> T {
        self.ns.wait_runs(self.patience, what, check).await
    }

    /// Waits until every Run named in `names` is terminal and returns them by name.
    pub async fn all_done(&self, names: &[String]) -> BTreeMap<String, Run> {
        self.ns.runs_ended(self.patience, names).await
    }

    /// No capacity is left held: Runs filling every live Pod's whole `runs` capacity, created
    /// now, all run at once (each held at its gate until every one of them is Running, so a
    /// single slot still held anywhere keeps one of them Pending and fails this), then
    /// succeed; and `explain`, reading only the API, shows no usage on any Pod afterwards.
    pub async fn assert_no_leaked_capacity(&self, prefix: &str) {
        let mut names = Vec::new();
        let mut want: BTreeMap<String, usize> = BTreeMap::new();
        for (pod, capacity) in &self.capacity {
            if !self.agents.contains_key(pod) {
                continue;
            }
            let slots = usize::try_from(capacity.get("runs")).expect("a slot count");
            want.insert(pod.clone(), slots);
            for i in 0..slots {
                let name = format!("{prefix}-{pod}-{i}");
                self.held(&name).create(&self.ns).await;
                names.push(name);
            }
        }
        let what = format!("all {} probe Runs Running at once", names.len());
        let per_pod = self
            .until(&what, |runs| {
                let running: Vec<&Run> = runs
                    .iter()
                    .filter(|r| names.contains(&r.name_any()) && r.phase() == RunPhase::Running)
                    .collect();
                (running.len() == names.len()).then(|| {
                    running.iter().fold(BTreeMap::new(), |mut m, r| {
                        let pod = r.active_pod().unwrap_or("-").to_string();
                        *m.entry(pod).or_insert(0usize) += 1;
                        m
                    })
                })
            })
            .await;
        assert_eq!(per_pod, want, "every live Pod full with the probe Runs");
        for name in &names {
            self.open(name);
        }
        let done = self.all_done(&names).await;
        for (name, r) in &done {
            assert_eq!(r.phase(), RunPhase::Succeeded, "{name}: {:?}", r.status);
        }
        let probe = names.last().expect("a live Pod to probe");
        let out = super::kruntimes()
            .args([
                "explain",
                &format!("run/{probe}"),
                "-n",
                &self.ns.name,
                "-o",
                "json",
            ])
            .output()
            .unwrap();
        let out = super::ok(&out, &format!("kubectl kruntimes explain run/{probe}"));
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        for pod in report["pods"].as_array().unwrap() {
            for resource in pod["resources"].as_array().unwrap() {
                assert_eq!(resource["used"], 0, "explain shows usage left: {pod}");
            }
        }
        eprintln!(
            "no leaked capacity: {} probe Runs filled {per_pod:?} at once; explain shows zero usage on every Pod",
            names.len()
        );
    }
}
